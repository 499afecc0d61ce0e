//! Unit tests. Shared helpers live here; one file per area.

use crate::*;
use memwarden_core::ids::PrincipalId;
use memwarden_core::item::{GuardState, Route, Taint};

mod config_rules;
mod core_integration;
mod credentials;
mod evidence;
mod gates_promotion_broker;
mod gates_retrieval;
mod gates_write;
mod props;
mod signals;
mod state;

pub(crate) const EPS: f64 = 1e-9;

pub(crate) fn agent(name: &str) -> PrincipalId {
    PrincipalId::new(name).unwrap()
}

/// The default scorer, compiled once for all tests.
pub(crate) fn scorer() -> &'static RiskScorer {
    static SCORER: std::sync::OnceLock<RiskScorer> = std::sync::OnceLock::new();
    SCORER.get_or_init(|| RiskScorer::with_defaults().unwrap())
}

pub(crate) fn guard(q: f64, tau: f64, h: f64, taint: Taint) -> GuardState {
    GuardState { q, tau, h, taint, successes: 0, failures: 0, risk: 0.0, reports: Vec::new() }
}

/// A private, active dialogue memory of `alice`: clean, q .5, tau .8, h .1.
pub(crate) fn mem(text: &str) -> LifecycleMemory {
    LifecycleMemory::new(agent("alice"), text, Route::Dialogue, guard(0.5, 0.8, 0.1, Taint::Clean))
}

/// `mem` with a change applied.
pub(crate) fn mem_with(text: &str, f: impl FnOnce(&mut LifecycleMemory)) -> LifecycleMemory {
    let mut m = mem(text);
    f(&mut m);
    m
}

pub(crate) fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < EPS
}
