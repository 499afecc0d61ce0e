//! Model checking of memwarden's authority gate (`memwarden check authority`).
//!
//! The paper behind memwarden checked a TLA+ *specification* of its gate with TLC. This crate
//! checks the *implementation*: a [stateright] model whose every transition calls the real code of
//! [`memwarden_core::authority`] — `Authority::admit_write` for writes,
//! `Authority::admit_write_observed` for paraphrases (with `Route::Summary` and *no* declared
//! parent: the agent's session was handed the parent, and the engine's session taint is all that
//! links them), `Authority::admit_tool_output` for an allow-listed tool echoing a value the agent
//! typed without declaring a source, `Authority::admit_attestation`, user grants signed with
//! `Grant::sign`, and `Authority::decide` (Algorithm 1) for every proposed action. Items live in
//! the model state as their serialized JSON and are rebuilt through the crate's validating
//! decoder whenever the gate needs them, so every label in the state is one the real code produced.
//!
//! Alongside the labels the model keeps *ghost* truth that no label can influence: whether a
//! slot's provenance includes an untrusted-origin write (a paraphrase or echo of such a slot is
//! tainted whatever its edges or label say), and which attestations came from honest, trusted
//! principals in which domain. Two `always` properties are checked over every interleaving of
//! writes, paraphrases, tool echoes, attestations, grants (genuine and forged), session ticks and
//! actions, up to a bound of memory slots and sessions:
//!
//! * **Sec** (the paper's invariant): an action the gate allows, whose context holds a ghost-tainted
//!   slot carrying the action's value, is backed by `k` distinct-domain trusted attestations of
//!   *that* value, or consumes a genuine, fresh, unused grant bound to exactly (tool, value, amount).
//! * **Non-malleability**: no paraphrase or tool echo gets a label above its input's.
//!
//! [`GateKind`] selects the gate under test: the real one, the real one with write-time origin
//! binding switched off (T2), the real one with the tool-output rule it had before issue 14 (a
//! caller-reported output without arguments took the tool's label), and two malleable baselines
//! (T1): a content-based gate and a gate that follows recorded lineage edges.
//!
//! With [`CheckConfig::tool_outputs`] ([`CheckConfig::product`]) the model also offers every way
//! a tool output enters memory: reported by the user, by another allow-listed tool or by the
//! untrusted inbox, each with and without an argument carrying the value; the agent's bare echo
//! (no argument, no input) of a slot its session was handed; and the tool writing its own output.
//! The ghost then also counts an honest trusted principal's own statement of a value (a tool's
//! output, a tool's or the user's report) for that principal's domain. This extension found that
//! a caller-reported output was credited to the *tool's* domain, so one tool could report
//! another's output, attest the value, and make two witnesses of one; the gate now counts a
//! memory by its voucher (`MemoryItem::voucher`: the reporter of an unvouched output, else the
//! writer).
//!
//! # The model
//!
//! One tenant; principals: the user (trusted, signs grants), the agent, an untrusted inbox (the
//! attacker), registries A and B (allow-listed tools in two domains), a mirror of A (allow-listed,
//! A's domain) and an untrusted sock puppet. Two values: `v_attack` (`ACCT-EVIL-9931`, which the
//! inbox spells with Cyrillic look-alikes) and `v_legit`. Transitions, while slots remain:
//! the inbox writes either value, the user writes `v_legit`; the agent paraphrases any slot
//! (origin `agent`, with the parent recorded); registry A echoes any slot's value (origin
//! `trusted_tool`). At any time: each of A, the mirror, B and the sock puppet may attest
//! `v_legit` once (so an action on `v_attack` can only count them by ignoring the value); the
//! user may issue one grant — exactly `(pay, v_attack, 1500)`, or one differing in amount or
//! tool — valid until the end of its session; the session may tick; and the agent may propose
//! `pay(v, 1500)` for either value with one slot or all slots as its context. With a one-slot
//! context it may present no grant, the user's grant (used, expired or mismatched ones too), or
//! a forgery signed with the attacker's key; with the whole memory it presents none (a grant
//! binds the action, not items, and each presentation costs the gate a signature check).
//!
//! Every real-code call is a pure function of its inputs (memwarden-core does no I/O), so the
//! model memoizes admissions, decodes and decisions on their exact inputs. A state that violates
//! Sec is not expanded further, and only the first violating state the breadth-first search meets
//! is reported, so a counterexample is a shortest one (with one checker thread).
//!
//! ```no_run
//! use memwarden_check::{check, check_all, render_markdown, CheckConfig, GateKind};
//!
//! // The paper's bound: 3 slots, 2 sessions, k = 2.
//! let report = check(GateKind::Real, &CheckConfig::paper());
//! assert!(report.sec_holds && report.nonmalleable_holds);
//! println!("{} reachable states", report.states);
//!
//! // All four gates, as a Markdown table with the counterexample traces.
//! println!("{}", render_markdown(&check_all(&CheckConfig::paper())));
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod acked;
mod engine;
mod rng;
mod model;
mod world;

pub use acked::{AckedReport, OPS_PER_SEQUENCE_MAX, SEQUENCES_MAX, check_acknowledged, render_acked_markdown};
pub use engine::{EngineReplayReport, WALK_STEPS_MAX, WALKS_MAX, render_engine_markdown, replay_engine, replay_engine_preset};

use model::{AuthorityModel, ModelState, Stats, Step};
use serde::Serialize;
use stateright::{Checker, Model};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Name of the Sec property.
pub const SEC: &str = "sec";
/// Name of the non-malleability property.
pub const NON_MALLEABILITY: &str = "non-malleability";
/// The reachable-state count of the paper's TLC run at its bound (3 slots, 2 sessions, k = 2).
pub const PAPER_TLC_STATES: usize = 3_270;
/// Largest number of slots or sessions accepted (slot indices and nonces are bytes).
pub const BOUND_MAX: usize = 64;

/// The bound of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CheckConfig {
    /// Memory slots (items that can be written).
    pub slots: usize,
    /// Sessions (one grant may be issued per session; a grant expires with its session).
    pub sessions: usize,
    /// Independent trusted attestations needed to elevate a value (`AuthorityConfig::k`).
    pub k: usize,
    /// Checker threads (1 gives deterministic, shortest counterexamples).
    pub threads: usize,
    /// Also offer the tool-output transitions of issue 14: a tool output *reported by a caller*
    /// (the user, another tool, the untrusted inbox — each with and without an argument carrying
    /// the value — and the agent's bare echo of a slot it was handed, with no argument), and a
    /// tool writing its own output. Off in [`CheckConfig::paper`] (the paper's action set, so its
    /// T1/T2 witnesses stay the paper's), on in [`CheckConfig::product`].
    pub tool_outputs: bool,
}

impl CheckConfig {
    /// The paper's bound: 3 slots, 2 sessions, k = 2.
    pub const fn paper() -> Self {
        Self { slots: 3, sessions: 2, k: 2, threads: 1, tool_outputs: false }
    }
    /// The larger bound run by the benchmark: 4 slots, 3 sessions, k = 2.
    pub const fn larger() -> Self {
        Self { slots: 4, sessions: 3, k: 2, threads: 1, tool_outputs: false }
    }
    /// The paper's bound with every transition the product offers (tool outputs included).
    pub const fn product() -> Self {
        Self { tool_outputs: true, ..Self::paper() }
    }
    fn validate(&self) -> Result<(), String> {
        if !(1..=BOUND_MAX).contains(&self.slots) || !(1..=BOUND_MAX).contains(&self.sessions) {
            return Err(format!("slots and sessions must be between 1 and {BOUND_MAX}"));
        }
        if self.k == 0 {
            return Err("k must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for CheckConfig {
    fn default() -> Self {
        Self::paper()
    }
}

/// The gate under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    /// memwarden's gate: `Authority` with the default configuration (and the given `k`). T3.
    Real,
    /// The real gate with write-time origin binding switched off
    /// (`AuthorityConfig { origin_binding: false, .. }`): every write is labelled trusted. T2.
    /// The crate's validating decoder refuses such items (label above origin), so this model hands
    /// the gate the admitted items directly, i.e. it ablates that read-time check as well.
    NoOriginBinding,
    /// A content gate: blocks an action when a context item's text carries an injection marker
    /// (`SYSTEM`, `URGENT`), which the attacker's raw write has and a paraphrase drops. T1.
    ContentBased,
    /// A lineage gate: blocks when a recorded derivation edge (or the item itself) reaches an
    /// untrusted-labelled item. The writer controls which edges it declares, so in this model the
    /// paraphrase declares none. T1.
    LineageEdges,
    /// The real gate with the tool-output rule memwarden had before issue 14: a caller-reported
    /// tool output without arguments is admitted as if the tool had written it (only arguments and
    /// inputs lowered its label), so whoever reports it gets the tool's label. Meaningful with
    /// [`CheckConfig::tool_outputs`]; without those transitions it is the real gate.
    UnvouchedToolOutputs,
}

impl GateKind {
    /// Every gate, in report order.
    pub const ALL: [GateKind; 5] =
        [GateKind::Real, GateKind::NoOriginBinding, GateKind::ContentBased, GateKind::LineageEdges, GateKind::UnvouchedToolOutputs];

    /// Kebab-case name (as on the command line).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Real => "real",
            Self::NoOriginBinding => "no-origin-binding",
            Self::ContentBased => "content-based",
            Self::LineageEdges => "lineage-edges",
            Self::UnvouchedToolOutputs => "unvouched-tool-outputs",
        }
    }

    /// Which of the paper's theorems this gate illustrates.
    pub fn theorem(self) -> &'static str {
        match self {
            Self::Real => "T3",
            Self::NoOriginBinding | Self::UnvouchedToolOutputs => "T2",
            Self::ContentBased | Self::LineageEdges => "T1",
        }
    }

    /// Whether Sec is expected to hold for this gate (only the real gate).
    pub fn expects_sec(self) -> bool {
        self == Self::Real
    }
}

impl std::fmt::Display for GateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for GateKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|g| g.as_str() == s)
            .ok_or_else(|| format!("unknown gate {s:?} (expected real, no-origin-binding, content-based, lineage-edges or unvouched-tool-outputs)"))
    }
}

/// How many allowed actions the search evaluated, by the rule that allowed them (counted per
/// evaluated transition, so a non-vacuous "Sec holds" shows non-zero `corroborated` and `granted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AllowCounts {
    /// Actions the real gate decided.
    pub decisions: usize,
    /// Allowed: no untrusted item pushes the value.
    pub no_untrusted_push: usize,
    /// Allowed: an untrusted-pushed value was corroborated (or already elevated).
    pub corroborated: usize,
    /// Allowed: a grant was consumed.
    pub granted: usize,
    /// Allowed by a baseline gate (content or lineage), or by any other rule.
    pub other: usize,
}

/// The result of checking one gate at one bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The gate.
    pub gate: GateKind,
    /// The bound.
    pub config: CheckConfig,
    /// Unique states reached.
    pub states: usize,
    /// States generated, including repeats (transitions explored).
    pub generated: usize,
    /// Depth of the search.
    pub max_depth: usize,
    /// Whether every reachable state was visited. The search does not expand a state that
    /// violates Sec, so this is false exactly when a Sec counterexample was found; `states` then
    /// counts the states visited before and around the violations.
    pub exhaustive: bool,
    /// Sec held in every visited state (and the model raised no error).
    pub sec_holds: bool,
    /// No transformation raised a label in any visited state (and the model raised no error).
    pub nonmalleable_holds: bool,
    /// The shortest trace to a Sec violation, one step per line.
    pub counterexample: Option<Vec<String>>,
    /// The shortest trace to a non-malleability violation.
    pub nonmalleability_counterexample: Option<Vec<String>>,
    /// Allowed actions seen during the search.
    pub allows: AllowCounts,
    /// Actions evaluated during the search, by verdict (`allow (elevated)`,
    /// `block (grant refused: reused)`, ...), so one can see which paths of the gate were exercised.
    pub verdicts: BTreeMap<String, usize>,
    /// Errors from the real code that disabled a transition (should be empty).
    pub errors: Vec<String>,
    /// Wall time of the search.
    pub elapsed_ms: u64,
}

impl CheckReport {
    /// Whether the result is what the paper's theorems predict for this gate: the real gate
    /// satisfies both properties with an exhaustive search; every other gate violates Sec.
    pub fn as_expected(&self) -> bool {
        if !self.errors.is_empty() {
            return false;
        }
        // Without the tool-output transitions the unvouched-output gate is the real gate.
        let expects_sec = self.gate.expects_sec() || (self.gate == GateKind::UnvouchedToolOutputs && !self.config.tool_outputs);
        if expects_sec { self.sec_holds && self.nonmalleable_holds && self.exhaustive } else { self.counterexample.is_some() }
    }
}

fn trace(model: &AuthorityModel, path: stateright::Path<ModelState, Step>) -> Vec<String> {
    let steps = path.into_vec();
    let mut out = Vec::new();
    for (n, (state, step)) in steps.iter().enumerate() {
        if let Some(step) = step {
            let post = steps.get(n + 1).map(|(s, _)| s);
            out.push(model.describe(state, *step, post));
        }
    }
    out
}

/// Model-check `gate` at bound `cfg` with stateright's breadth-first checker.
pub fn check(gate: GateKind, cfg: &CheckConfig) -> CheckReport {
    let started = Instant::now();
    let mut report = CheckReport {
        gate,
        config: *cfg,
        states: 0,
        generated: 0,
        max_depth: 0,
        exhaustive: false,
        sec_holds: false,
        nonmalleable_holds: false,
        counterexample: None,
        nonmalleability_counterexample: None,
        allows: AllowCounts::default(),
        verdicts: BTreeMap::new(),
        errors: Vec::new(),
        elapsed_ms: 0,
    };
    let stats = Arc::new(Stats::default());
    let model = match cfg.validate().and_then(|()| AuthorityModel::new(gate, *cfg, Arc::clone(&stats))) {
        Ok(m) => m,
        Err(e) => {
            report.errors.push(e);
            return report;
        }
    };
    let checker = model.checker().threads(cfg.threads.max(1)).spawn_bfs().join();
    report.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report.states = checker.unique_state_count();
    report.generated = checker.state_count();
    report.max_depth = checker.max_depth();
    let sec = checker.discovery(SEC);
    let nm = checker.discovery(NON_MALLEABILITY);
    // The search stops expanding a state that violates Sec (and stops altogether once both
    // properties have counterexamples), so it is exhaustive exactly when Sec was never violated.
    report.exhaustive = sec.is_none();
    report.counterexample = sec.map(|p| trace(checker.model(), p));
    report.nonmalleability_counterexample = nm.map(|p| trace(checker.model(), p));
    report.allows = stats.allows();
    report.verdicts = stats.verdicts();
    report.errors = stats.errors();
    report.sec_holds = report.counterexample.is_none() && report.errors.is_empty();
    report.nonmalleable_holds = report.nonmalleability_counterexample.is_none() && report.errors.is_empty();
    report
}

/// Check every gate at bound `cfg`, in [`GateKind::ALL`] order.
pub fn check_all(cfg: &CheckConfig) -> Vec<CheckReport> {
    GateKind::ALL.into_iter().map(|g| check(g, cfg)).collect()
}

/// Render reports as Markdown: a summary table, then each counterexample trace.
pub fn render_markdown(reports: &[CheckReport]) -> String {
    let yes_no = |b: bool| if b { "holds" } else { "**violated**" };
    let mut out = String::from(
        "| gate | theorem | slots | sessions | k | tool outputs | states | Sec | non-malleability | allows (no push / corroborated / granted) | time |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let states = if r.exhaustive { r.states.to_string() } else { format!("{} (not expanded past Sec violations)", r.states) };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} ms |\n",
            r.gate,
            r.gate.theorem(),
            r.config.slots,
            r.config.sessions,
            r.config.k,
            if r.config.tool_outputs { "yes" } else { "no" },
            states,
            yes_no(r.sec_holds),
            yes_no(r.nonmalleable_holds),
            r.allows.no_untrusted_push,
            r.allows.corroborated,
            r.allows.granted,
            r.elapsed_ms
        ));
    }
    out.push_str(&format!("\nThe paper's TLC run reached {PAPER_TLC_STATES} states at 3 slots, 2 sessions, k = 2.\n"));
    for r in reports.iter().filter(|r| r.gate == GateKind::Real && !r.verdicts.is_empty()) {
        let v: Vec<String> = r.verdicts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        out.push_str(&format!(
            "\nVerdicts of the real gate over the evaluated actions ({} slots, {} sessions): {}.\n",
            r.config.slots,
            r.config.sessions,
            v.join(", ")
        ));
    }
    for r in reports {
        for (what, t) in [("Sec", &r.counterexample), ("non-malleability", &r.nonmalleability_counterexample)] {
            if let Some(t) = t {
                out.push_str(&format!("\n`{}`: {what} counterexample\n\n", r.gate));
                for (n, line) in t.iter().enumerate() {
                    out.push_str(&format!("{}. {line}\n", n + 1));
                }
            }
        }
        for e in &r.errors {
            out.push_str(&format!("\n`{}`: model error: {e}\n", r.gate));
        }
    }
    out
}
