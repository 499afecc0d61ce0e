//! Coalescing concurrent embedding calls into shared forward passes.
//!
//! On a CPU a short query's forward pass is bound by reading the model's weights, not by
//! arithmetic: eight queries in one padded batch cost little more than one. When several
//! threads embed at once (a server answering concurrent searches), [`CoalescingEmbedder`]
//! runs whatever is waiting as one call to the inner embedder instead of one call each.
//!
//! Nobody waits for a batch to fill: a call that finds the model idle runs at once, alone if
//! nobody else is waiting, so a single client sees no added latency. Calls that arrive while a
//! pass is running queue up; when it ends, the first of them runs the whole queue (up to
//! [`COALESCE_TEXTS_MAX`] texts) as the next pass and hands every caller its own vectors.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::{EmbedError, Embedder};

/// Most texts one coalesced call passes to the inner embedder. A single call with more texts
/// still runs, alone.
pub const COALESCE_TEXTS_MAX: usize = 64;

type Outcome = Result<Vec<Vec<f32>>, EmbedError>;

#[derive(Default)]
struct State {
    /// Waiting calls: ticket and texts, oldest first.
    queue: Vec<(u64, Vec<String>)>,
    /// Finished calls' results, by ticket, until their caller takes them.
    done: HashMap<u64, Outcome>,
    /// A pass is running.
    busy: bool,
    next_ticket: u64,
}

/// Wraps an embedder so concurrent calls share forward passes (see the module docs).
/// Results are exactly the inner embedder's for the same texts in a batch.
///
/// ```
/// use std::sync::Arc;
/// use memwarden_embed::{CoalescingEmbedder, Embedder, HashEmbedder};
///
/// let e = CoalescingEmbedder::new(Arc::new(HashEmbedder::new(64)));
/// let v = e.embed(&["pay the invoice"]).unwrap();
/// assert_eq!(v, HashEmbedder::new(64).embed(&["pay the invoice"]).unwrap());
/// ```
pub struct CoalescingEmbedder {
    inner: Arc<dyn Embedder>,
    state: Mutex<State>,
    changed: Condvar,
}

impl std::fmt::Debug for CoalescingEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoalescingEmbedder").field("inner", &self.inner.name()).finish_non_exhaustive()
    }
}

/// Ends a pass: on every exit path, including a panic in the inner embedder, the batch's callers
/// get an outcome and the next caller may start a pass.
struct Pass<'a> {
    owner: &'a CoalescingEmbedder,
    tickets: Vec<u64>,
    outcomes: Option<Vec<Outcome>>,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut st = self.owner.lock();
        let outcomes = self.outcomes.take().unwrap_or_default();
        let mut outcomes = outcomes.into_iter();
        for &t in &self.tickets {
            let o = outcomes.next().unwrap_or_else(|| Err(EmbedError("the embedding pass failed".into())));
            st.done.insert(t, o);
        }
        st.busy = false;
        drop(st);
        self.owner.changed.notify_all();
    }
}

impl CoalescingEmbedder {
    /// Coalesces concurrent calls to `inner`.
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self { inner, state: Mutex::new(State::default()), changed: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a caller panicked while holding it; the state is a queue
        // and a map that every path leaves consistent.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes queued calls, oldest first, while they fit in [`COALESCE_TEXTS_MAX`] texts (the
    /// first is always taken).
    fn take_batch(st: &mut State) -> Vec<(u64, Vec<String>)> {
        let mut texts = 0;
        let mut n = 0;
        for (_, t) in &st.queue {
            if n > 0 && texts + t.len() > COALESCE_TEXTS_MAX {
                break;
            }
            texts += t.len();
            n += 1;
        }
        st.queue.drain(..n).collect()
    }

    fn run(&self, batch: Vec<(u64, Vec<String>)>) {
        let mut pass = Pass { owner: self, tickets: batch.iter().map(|(t, _)| *t).collect(), outcomes: None };
        let all: Vec<&str> = batch.iter().flat_map(|(_, t)| t.iter().map(String::as_str)).collect();
        let outcomes = match self.inner.embed(&all) {
            Ok(vectors) if vectors.len() == all.len() => {
                let mut vectors = vectors.into_iter();
                batch.iter().map(|(_, t)| Ok(vectors.by_ref().take(t.len()).collect())).collect()
            }
            Ok(vectors) => {
                let e = EmbedError(format!("{} returned {} vectors for {} texts", self.inner.name(), vectors.len(), all.len()));
                batch.iter().map(|_| Err(e.clone())).collect()
            }
            Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
        };
        pass.outcomes = Some(outcomes);
    }
}

impl Embedder for CoalescingEmbedder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn dims(&self) -> usize {
        self.inner.dims()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut st = self.lock();
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push((ticket, texts.iter().map(|t| (*t).to_owned()).collect()));
        loop {
            if let Some(outcome) = st.done.remove(&ticket) {
                return outcome;
            }
            if st.busy {
                st = self.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // The model is idle: run the queue (our own call is in it unless an earlier pass
            // took it, in which case its result is already in `done`).
            let batch = Self::take_batch(&mut st);
            if batch.is_empty() {
                // Unreachable: an unfinished call is either queued or in a running pass.
                return Err(EmbedError("coalescing embedder lost a call".into()));
            }
            st.busy = true;
            drop(st);
            self.run(batch);
            st = self.lock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashEmbedder;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts calls and texts, and holds each call long enough for others to queue.
    struct Slow {
        inner: HashEmbedder,
        calls: AtomicUsize,
        largest: AtomicUsize,
        fail_on: Option<&'static str>,
    }

    impl Embedder for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn dims(&self) -> usize {
            16
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.largest.fetch_max(texts.len(), Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            if let Some(bad) = self.fail_on
                && texts.contains(&bad)
            {
                return Err(EmbedError(format!("refused {bad}")));
            }
            self.inner.embed(texts)
        }
    }

    fn slow(fail_on: Option<&'static str>) -> Arc<Slow> {
        Arc::new(Slow { inner: HashEmbedder::new(16), calls: AtomicUsize::new(0), largest: AtomicUsize::new(0), fail_on })
    }

    #[test]
    fn concurrent_calls_share_passes_and_each_gets_its_own_vectors() {
        let inner = slow(None);
        let e = Arc::new(CoalescingEmbedder::new(inner.clone()));
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let e = e.clone();
                std::thread::spawn(move || {
                    let texts = [format!("query {i}"), format!("second {i}")];
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    (e.embed(&refs).unwrap(), HashEmbedder::new(16).embed(&refs).unwrap())
                })
            })
            .collect();
        for t in threads {
            let (got, want) = t.join().unwrap();
            assert_eq!(got, want);
        }
        let calls = inner.calls.load(Ordering::SeqCst);
        assert!(calls < 16, "16 concurrent calls took {calls} passes");
        assert!(inner.largest.load(Ordering::SeqCst) <= COALESCE_TEXTS_MAX);
    }

    #[test]
    fn a_lone_call_runs_at_once_and_an_oversized_one_runs_alone() {
        let inner = slow(None);
        let e = CoalescingEmbedder::new(inner.clone());
        assert_eq!(e.embed(&["one"]).unwrap().len(), 1);
        let many: Vec<String> = (0..COALESCE_TEXTS_MAX + 5).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(e.embed(&refs).unwrap(), HashEmbedder::new(16).embed(&refs).unwrap());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        assert!(e.embed(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_failed_pass_fails_its_callers_and_the_next_pass_runs() {
        let e = Arc::new(CoalescingEmbedder::new(slow(Some("poison"))));
        let bad = {
            let e = e.clone();
            std::thread::spawn(move || e.embed(&["poison"]))
        };
        let err = bad.join().unwrap().unwrap_err();
        assert!(err.0.contains("refused poison"), "{err}");
        assert_eq!(e.embed(&["fine"]).unwrap().len(), 1);
    }

    #[test]
    fn a_panicking_embedder_does_not_wedge_later_calls() {
        struct Panics(AtomicUsize);
        impl Embedder for Panics {
            fn name(&self) -> &str {
                "panics once"
            }
            fn dims(&self) -> usize {
                8
            }
            fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
                if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("model crashed");
                }
                HashEmbedder::new(8).embed(texts)
            }
        }
        let e = Arc::new(CoalescingEmbedder::new(Arc::new(Panics(AtomicUsize::new(0)))));
        let first = {
            let e = e.clone();
            std::thread::spawn(move || e.embed(&["a"]))
        };
        assert!(first.join().is_err(), "the panic reaches the caller that ran the pass");
        assert_eq!(e.embed(&["b"]).unwrap().len(), 1);
    }
}
