//! Idempotent requests (issue 35.4): [`Engine::idempotent`] runs one request's operation with
//! its `Idempotency-Key`; the operation's first commit ([`Engine::finish`]) claims the key in
//! the same transaction ([`memwarden_store::Store::commit_idempotent`]), so a retry of a write
//! whose answer was lost finds the key and is never applied twice.
//!
//! The key travels in a thread-local for the span of the call (an operation runs on one thread,
//! start to finish), cleared by a guard even if the operation panics, so it never leaks into
//! the next request served by the same thread.

use std::cell::RefCell;

use memwarden_store::IdempotencyTag;

use crate::Engine;

#[derive(Default)]
struct Slot {
    /// The key, until the first commit takes it.
    tag: Option<IdempotencyTag>,
    /// Whether a commit under the key succeeded.
    claimed: bool,
}

thread_local! {
    static SLOT: RefCell<Option<Slot>> = const { RefCell::new(None) };
}

/// Clears the slot when the call ends, however it ends.
struct Clear;

impl Drop for Clear {
    fn drop(&mut self) {
        SLOT.with(|s| s.borrow_mut().take());
    }
}

/// The key of the request this thread serves, if its operation has not committed yet.
pub(crate) fn take_tag() -> Option<IdempotencyTag> {
    SLOT.with(|s| s.borrow_mut().as_mut().and_then(|slot| slot.tag.take()))
}

/// The commit that took the key succeeded.
pub(crate) fn mark_claimed() {
    SLOT.with(|s| {
        if let Some(slot) = s.borrow_mut().as_mut() {
            debug_assert!(slot.tag.is_none(), "claimed before the key was taken");
            slot.claimed = true;
        }
    });
}

impl Engine {
    /// Run `f`, one request's operation, under the idempotency key `tag`: its first commit
    /// claims the key (an operation that commits nothing, or whose commit fails, leaves it
    /// free). Returns `f`'s result and whether the key was claimed, i.e. whether the operation
    /// committed under it and its answer should be kept for retries.
    pub fn idempotent<T>(&self, tag: IdempotencyTag, f: impl FnOnce(&Engine) -> T) -> (T, bool) {
        let nested = SLOT.with(|s| s.borrow().is_some());
        debug_assert!(!nested, "idempotent calls do not nest");
        if nested {
            // Never claim a key for the wrong operation: run without one.
            return (f(self), false);
        }
        SLOT.with(|s| *s.borrow_mut() = Some(Slot { tag: Some(tag), claimed: false }));
        let _clear = Clear;
        let out = f(self);
        let claimed = SLOT.with(|s| s.borrow().as_ref().is_some_and(|slot| slot.claimed));
        (out, claimed)
    }
}
