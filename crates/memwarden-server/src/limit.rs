//! Per-key rate limiting (token buckets).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// One token bucket per key id: `rate` tokens per second, at most `burst` stored.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("rate", &self.rate).field("burst", &self.burst).finish()
    }
}

impl RateLimiter {
    /// A limiter; `rate == 0` disables it.
    pub fn new(rate: f64, burst: u32) -> Self {
        Self { rate, burst: f64::from(burst.max(1)), buckets: Mutex::new(HashMap::new()) }
    }

    /// Take one token for `key`. `Err(seconds)` tells how long until one is available.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        self.check_at(key, Instant::now())
    }

    fn check_at(&self, key: &str, now: Instant) -> Result<(), u64> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let Ok(mut map) = self.buckets.lock() else { return Ok(()) };
        let b = map.entry(key.to_owned()).or_insert(Bucket { tokens: self.burst, last: now });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - b.tokens) / self.rate;
            Err(wait.ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_empties_and_refills() {
        let l = RateLimiter::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check_at("k", t0).is_ok());
        }
        assert!(l.check_at("k", t0).is_err());
        assert!(l.check_at("other", t0).is_ok());
        assert!(l.check_at("k", t0 + Duration::from_millis(600)).is_ok());
        assert!(RateLimiter::new(0.0, 1).check("k").is_ok());
    }
}

/// Requests in flight per API key (issue 35.5): a key may hold at most `max` at once, so one
/// key cannot take every worker while others wait. A slot is held by an [`InFlightSlot`] and
/// freed when it drops (also when the request is cancelled).
#[derive(Debug)]
pub struct KeyInFlight {
    max: usize,
    counts: std::sync::Arc<Mutex<HashMap<String, usize>>>,
}

/// One request's slot (see [`KeyInFlight`]).
#[derive(Debug)]
pub struct InFlightSlot {
    key: String,
    counts: std::sync::Arc<Mutex<HashMap<String, usize>>>,
}

impl KeyInFlight {
    /// At most `max` (≥ 1) requests in flight per key.
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), counts: std::sync::Arc::default() }
    }

    /// A slot for `key`, or `None` when it already has `max` requests in flight.
    pub fn enter(&self, key: &str) -> Option<InFlightSlot> {
        let mut c = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = c.entry(key.to_owned()).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        debug_assert!(*n <= self.max);
        Some(InFlightSlot { key: key.to_owned(), counts: std::sync::Arc::clone(&self.counts) })
    }

    /// Requests `key` has in flight.
    pub fn count(&self, key: &str) -> usize {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).copied().unwrap_or(0)
    }
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = c.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod in_flight_tests {
    use super::KeyInFlight;

    #[test]
    fn a_key_holds_at_most_max_slots_and_a_dropped_slot_frees_one() {
        let f = KeyInFlight::new(2);
        let a1 = f.enter("a").unwrap();
        let a2 = f.enter("a").unwrap();
        assert!(f.enter("a").is_none(), "a third request of one key waits");
        let b = f.enter("b");
        assert!(b.is_some(), "another key is not affected");
        drop(a1);
        assert_eq!(f.count("a"), 1);
        let a3 = f.enter("a");
        assert!(a3.is_some());
        drop((a2, a3, b));
        assert_eq!((f.count("a"), f.count("b")), (0, 0), "nothing leaks");
    }
}
