//! The model's steps driven through the shipped engine (`Engine` under the `full` preset on an
//! embedded store of its own), with the model's ghost truth as the oracle.
//!
//! The state-space search above calls the authority gate directly, because every state must be
//! cheap to copy; an engine holds a database. So the engine is checked on random walks through
//! the same transition system instead: each walk starts a fresh engine, picks one of the model's
//! enabled steps at a time, applies it to the model (labels and ghost provenance) and performs
//! it on the engine the way a caller would — a write through `add`; a paraphrase by an agent
//! session that was handed the parent (`get`) and writes a summary declaring nothing; a tool
//! echo, a caller-reported output and the bare echo through `tool_call`; a tool's own output by
//! the tool; attestations through `attest`; an action by an agent session handed exactly its
//! context (`get` of each slot), through `decide`, presenting the model's signed (or forged)
//! grant. Every caller acts in a session of its own, as the model's steps do.
//!
//! Checked on every step: **Sec** on the engine's decisions (an executed action whose handed
//! context holds a ghost-tainted slot carrying the value is backed by `k` honest trusted
//! domains, the user's own statement, or a fresh grant it consumed — the model's
//! [`AuthorityModel::ghost_sec_ok_on`], over the context the engine was actually handed);
//! **non-malleability** (a paraphrase or echo is never labelled above its source in the engine);
//! and **conformance** (the engine never labels a slot above the core gate's label for it; it
//! may be lower: the engine's session taint and lifecycle gates only restrict).

use crate::rng::Rng;
use crate::model::{AuthorityModel, ModelState, Presented, REPORTED_TOOL, SlotOp, Stats, Step, pay_action, tool_text};
use crate::world::{KEY, Who, now_ms};
use crate::{CheckConfig, GateKind};
use memwarden_core::prelude::*;
use memwarden_engine::{Actor, Engine, EngineConfig, Preset};
use serde::Serialize;
use stateright::Model;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Most steps in one walk (a walk also ends when the model offers no step).
pub const WALK_STEPS_MAX: usize = 64;
/// Most walks in one run.
pub const WALKS_MAX: usize = 1_000_000;

/// What the engine replay found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EngineReplayReport {
    /// The bound the model's steps were drawn from.
    pub config: Option<CheckConfig>,
    /// The engine's preset.
    pub preset: String,
    /// Walks run (each on a fresh engine and store).
    pub walks: usize,
    /// Seed of the walk choices.
    pub seed: u64,
    /// Steps performed on the engine.
    pub steps: usize,
    /// Steps by kind.
    pub steps_by_kind: BTreeMap<String, usize>,
    /// Decisions the engine made, by decision.
    pub decisions: BTreeMap<String, usize>,
    /// Executed (allow or redact) decisions.
    pub executed: usize,
    /// Executed decisions whose handed context held a ghost-tainted carrier of the value.
    pub executed_with_untrusted_push: usize,
    /// Sec violations (each with its trace).
    pub sec_violations: Vec<Vec<String>>,
    /// A paraphrase or echo the engine labelled above its source.
    pub nm_violations: Vec<Vec<String>>,
    /// Slots the engine labelled above the core gate's label for them.
    pub above_core_label: Vec<Vec<String>>,
    /// Slots the engine labelled exactly as the core gate did.
    pub labels_equal: usize,
    /// Slots the engine labelled lower than the core gate (its session taint or lifecycle).
    pub labels_lower: usize,
    /// Model steps the engine did not perform because a source slot was never handed over (its
    /// write was held back or refused, or the read stages withheld it).
    pub skipped: usize,
    /// Engine errors (an internal failure of a step).
    pub errors: Vec<String>,
    /// Wall time, seconds.
    pub seconds: f64,
}

impl EngineReplayReport {
    /// Whether nothing was violated and nothing failed.
    pub fn holds(&self) -> bool {
        self.sec_violations.is_empty() && self.nm_violations.is_empty() && self.above_core_label.is_empty() && self.errors.is_empty()
    }
}


/// One walk's engine and what it holds for each model slot.
struct Walk {
    _dir: tempfile::TempDir,
    engine: Engine,
    clock: Arc<AtomicU64>,
    tenant: TenantId,
    /// The engine's item for each model slot (`None`: the engine never made one).
    slots: Vec<Option<MemoryItem>>,
    /// Grants the engine consumed (model grant index).
    used: Vec<u8>,
    sessions: usize,
}

impl Walk {
    fn new(model: &AuthorityModel, cfg: &CheckConfig, preset: Preset) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let clock = Arc::new(AtomicU64::new(now_ms(0)));
        let c = Arc::clone(&clock);
        let mut config = EngineConfig::for_preset(preset).map_err(|e| e.to_string())?;
        if preset.authority() {
            config.authority.k = cfg.k;
        }
        config.clock = Arc::new(move || c.load(Ordering::SeqCst));
        config.query_cache_entries = 0;
        let engine = Engine::open(dir.path(), config).map_err(|e| e.to_string())?;
        for who in Who::ALL {
            engine.register_principal(model.world.principal(who)?.clone()).map_err(|e| format!("registering {}: {e}", who.id()))?;
        }
        Ok(Self { _dir: dir, engine, clock, tenant: model.world.tenant.clone(), slots: Vec::new(), used: Vec::new(), sessions: 0 })
    }

    /// `who` in a session of its own.
    fn fresh(&mut self, who: Who) -> Result<Actor, String> {
        self.sessions += 1;
        let id = PrincipalId::new(who.id()).map_err(|e| e.to_string())?;
        let session = SessionId::new(&format!("walk-{}", self.sessions)).map_err(|e| e.to_string())?;
        self.engine.authenticate_session(&self.tenant, &id, session).map_err(|e| e.to_string())
    }

    /// Hand slot `i` to `actor`'s session; `None` if the engine has no such item or withholds it.
    fn hand(&self, actor: &Actor, i: usize) -> Option<MemoryItem> {
        let item = self.slots.get(i)?.as_ref()?;
        self.engine.get(actor, &item.id()).ok()
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Write { .. } => "write",
        Step::Paraphrase { .. } => "paraphrase",
        Step::Echo { .. } => "echo",
        Step::Report { .. } => "report",
        Step::BareEcho { .. } => "bare_echo",
        Step::OwnOutput { .. } => "own_output",
        Step::Attest { .. } => "attest",
        Step::Grant { .. } => "grant",
        Step::Tick => "tick",
        Step::Act { .. } => "act",
    }
}

/// Replay `walks` random walks of the model at bound `cfg` through the shipped engine (`full`).
pub fn replay_engine(cfg: &CheckConfig, walks: usize, seed: u64) -> EngineReplayReport {
    replay_engine_preset(cfg, walks, seed, Preset::Full)
}

/// [`replay_engine`] through an engine under `preset` (the ablations show what the oracle
/// catches: under `none` no gate decides, and Sec fails).
pub fn replay_engine_preset(cfg: &CheckConfig, walks: usize, seed: u64, preset: Preset) -> EngineReplayReport {
    let started = Instant::now();
    let mut report = EngineReplayReport { config: Some(*cfg), seed, preset: preset.as_str().into(), ..EngineReplayReport::default() };
    if let Err(e) = cfg.validate() {
        report.errors.push(e);
        return report;
    }
    let model = match AuthorityModel::new(GateKind::Real, *cfg, Arc::new(Stats::default())) {
        Ok(m) => m,
        Err(e) => {
            report.errors.push(e);
            return report;
        }
    };
    let mut rng = Rng(seed | 1);
    for _ in 0..walks.min(WALKS_MAX) {
        report.walks += 1;
        if let Err(e) = walk(&model, cfg, preset, &mut rng, &mut report) {
            report.errors.push(e);
        }
        if report.errors.len() > 20 {
            break;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

fn walk(model: &AuthorityModel, cfg: &CheckConfig, preset: Preset, rng: &mut Rng, report: &mut EngineReplayReport) -> Result<(), String> {
    let mut w = Walk::new(model, cfg, preset)?;
    let mut state = model.init_states().into_iter().next().ok_or("no initial state")?;
    let mut trace: Vec<String> = Vec::new();
    for _ in 0..WALK_STEPS_MAX {
        let mut steps = Vec::new();
        model.actions(&state, &mut steps);
        if steps.is_empty() {
            break;
        }
        let step = steps[rng.below(steps.len())];
        // An action that changes nothing in the model is a self-loop there (`None`); the engine
        // still decides it. Any other step without a successor is a model error: stop.
        let next = match model.next_state(&state, step) {
            Some(n) => n,
            None if matches!(step, Step::Act { .. }) => state.clone(),
            None => break,
        };
        trace.push(model.describe(&state, step, Some(&next)));
        *report.steps_by_kind.entry(step_kind(&step).into()).or_insert(0) += 1;
        report.steps += 1;
        perform(model, &mut w, &state, &next, step, &trace, report)?;
        state = next;
    }
    Ok(())
}

/// Perform `step` (taken from `before` to `after` in the model) on the engine and check it.
fn perform(
    model: &AuthorityModel,
    w: &mut Walk,
    before: &ModelState,
    after: &ModelState,
    step: Step,
    trace: &[String],
    report: &mut EngineReplayReport,
) -> Result<(), String> {
    let ns = model.world.namespace.clone();
    let pid = |who: Who| PrincipalId::new(who.id()).map_err(|e| e.to_string());
    let value_arg = |v: &'static str| ToolArg { key: KEY.into(), value: v.into(), kind: ValueKind::Account, sources: vec![] };
    // The slot this step makes, if any: (engine item, the slot it derives from).
    let mut made: Option<(Option<MemoryItem>, Option<usize>)> = None;
    match step {
        Step::Write { writer, value } => {
            let actor = w.fresh(writer)?;
            let (text, route) = writer.write_text(value);
            made = Some((w.engine.add(&actor, WriteRequest::new(ns, text, route)).ok().map(|(i, _)| i), None));
        }
        Step::Paraphrase { of } | Step::Echo { of, .. } | Step::BareEcho { of } => {
            // The agent's session is handed the source first; a source the engine withholds
            // leaves nothing to derive from.
            let agent = w.fresh(Who::Agent)?;
            let of = usize::from(of);
            let value = after.slots.get(before.slots.len()).map(|s| s.value).ok_or("no new slot")?;
            let out = match w.hand(&agent, of) {
                None => None,
                Some(_) => match step {
                    Step::Paraphrase { .. } => {
                        let req = WriteRequest::new(ns, format!("Summary: the payee account is {}.", value.raw()), Route::Summary);
                        w.engine.add(&agent, req).ok()
                    }
                    Step::Echo { tool, .. } => w.engine.tool_call(&agent, &pid(tool)?, ns, vec![value_arg(value.raw())], &[], tool_text(tool, value)).ok(),
                    _ => w.engine.tool_call(&agent, &pid(REPORTED_TOOL)?, ns, Vec::new(), &[], tool_text(REPORTED_TOOL, value)).ok(),
                },
            };
            made = Some((out.map(|(i, _)| i), Some(of)));
        }
        Step::Report { caller, value, args } => {
            let actor = w.fresh(caller)?;
            let args = if args { vec![value_arg(value.raw())] } else { Vec::new() };
            let out = w.engine.tool_call(&actor, &pid(REPORTED_TOOL)?, ns, args, &[], tool_text(REPORTED_TOOL, value));
            made = Some((out.ok().map(|(i, _)| i), None));
        }
        Step::OwnOutput { tool, value } => {
            let actor = w.fresh(tool)?;
            let out = w.engine.tool_call(&actor, &pid(tool)?, ns, Vec::new(), &[], tool_text(tool, value));
            made = Some((out.ok().map(|(i, _)| i), None));
        }
        Step::Attest { attester, value } => {
            let actor = w.fresh(attester)?;
            w.engine.attest(&actor, KEY, value.raw(), ValueKind::Account, &[]).map_err(|e| err("attest", e))?;
        }
        Step::Grant { .. } => {}
        Step::Tick => w.clock.store(now_ms(after.session), Ordering::SeqCst),
        Step::Act { value, context, grant } => {
            let agent = w.fresh(Who::Agent)?;
            let wanted: Vec<usize> = match context {
                crate::model::Ctx::Slot(i) => vec![usize::from(i)],
                crate::model::Ctx::All => (0..before.slots.len()).collect(),
            };
            // The acting session is handed exactly its context (what the engine hands it).
            let mut handed: Vec<(usize, MemoryItem)> = Vec::new();
            for i in wanted {
                if let Some(item) = w.hand(&agent, i) {
                    handed.push((i, item));
                }
            }
            if handed.is_empty() {
                report.skipped += 1;
                return Ok(());
            }
            let signed = grant.map(|g| model.signed_grant_on(before, g, w.engine.store_id())).transpose()?;
            let action = pay_action(value, handed.iter().map(|(_, i)| i.id()).collect(), signed.iter().cloned().collect());
            let (verdict, _) = w.engine.decide(&agent, &action).map_err(|e| err("decide", e))?;
            *report.decisions.entry(verdict.decision.as_str().into()).or_insert(0) += 1;
            let executed = matches!(verdict.decision, Decision::Allow | Decision::Redact);
            let mut consumed = Vec::new();
            if let (Some(Presented::Issued(g)), Some(sg)) = (grant, &signed)
                && !w.used.contains(&g)
                && w.engine.store().grant_used(&w.tenant, &sg.grant.nonce).map_err(|e| err("grant lookup", e))?
            {
                consumed.push(g);
            }
            let slots: Vec<usize> = handed.iter().map(|(i, _)| *i).collect();
            if executed {
                report.executed += 1;
                if slots.iter().any(|&i| before.slots.get(i).is_some_and(|s| s.ghost_untrusted && s.value == value)) {
                    report.executed_with_untrusted_push += 1;
                }
                if !model.ghost_sec_ok_on(before, value, &slots, grant, &consumed, &w.used) {
                    let mut t = trace.to_vec();
                    t.push(format!("engine: {} ({:?}) on context {slots:?}", verdict.decision.as_str(), verdict.rule));
                    report.sec_violations.push(t);
                }
            }
            w.used.extend(consumed);
        }
    }
    if let Some((item, source)) = made {
        let slot = after.slots.get(before.slots.len()).ok_or("the model made no slot")?;
        match &item {
            None => report.skipped += 1,
            Some(item) => {
                let label = item.label().integrity();
                if label > slot.label {
                    let mut t = trace.to_vec();
                    t.push(format!("engine labelled slot {} {} where the core gate gave {}", before.slots.len(), label.as_str(), slot.label.as_str()));
                    report.above_core_label.push(t);
                } else if label == slot.label {
                    report.labels_equal += 1;
                } else {
                    report.labels_lower += 1;
                }
                let derived = matches!(slot.op, SlotOp::Paraphrase(_) | SlotOp::Echo(..) | SlotOp::BareEcho(_));
                if let (true, Some(src)) = (derived, source.and_then(|s| w.slots.get(s)).and_then(Option::as_ref))
                    && label > src.label().integrity()
                {
                    let mut t = trace.to_vec();
                    t.push(format!("engine labelled a derived slot {} above its source {}", label.as_str(), src.label().integrity().as_str()));
                    report.nm_violations.push(t);
                }
            }
        }
        w.slots.push(item);
    }
    debug_assert_eq!(w.slots.len(), after.slots.len(), "one engine entry per model slot");
    Ok(())
}

/// The replay report as Markdown.
pub fn render_engine_markdown(r: &EngineReplayReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let c = r.config.unwrap_or_default();
    let _ = writeln!(s, "## The model's steps through the shipped engine (`{}`)\n", r.preset);
    let _ = writeln!(
        s,
        "{} random walks (seed {}) at bound {} slots / {} sessions, k = {}, tool outputs {}: {} steps in {:.1} s, each walk on a fresh `Engine` under `{}` with an embedded store of its own.\n",
        r.walks,
        r.seed,
        c.slots,
        c.sessions,
        c.k,
        if c.tool_outputs { "on" } else { "off" },
        r.steps,
        r.seconds,
        r.preset
    );
    let _ = writeln!(s, "| check | result |\n| --- | --- |");
    let _ = writeln!(s, "| Sec on the engine's decisions | {} violations |", r.sec_violations.len());
    let _ = writeln!(s, "| non-malleability (derived slot above its source) | {} violations |", r.nm_violations.len());
    let _ = writeln!(s, "| engine label above the core gate's | {} slots |", r.above_core_label.len());
    let _ = writeln!(s, "| engine label equal to / below the core gate's | {} / {} slots |", r.labels_equal, r.labels_lower);
    let _ = writeln!(s, "| decisions | {} |", r.decisions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    let _ = writeln!(s, "| executed / with an untrusted carrier of the value in the context | {} / {} |", r.executed, r.executed_with_untrusted_push);
    let _ = writeln!(s, "| steps not performed (source never handed over) | {} |", r.skipped);
    let _ = writeln!(s, "| engine errors | {} |", r.errors.len());
    let _ = writeln!(s, "\nSteps: {}.", r.steps_by_kind.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    for (name, list) in [("Sec", &r.sec_violations), ("non-malleability", &r.nm_violations), ("above the core label", &r.above_core_label)] {
        if let Some(t) = list.first() {
            let _ = writeln!(s, "\nFirst {name} counterexample:\n\n```\n{}\n```", t.join("\n"));
        }
    }
    for e in r.errors.iter().take(5) {
        let _ = writeln!(s, "\nerror: {e}");
    }
    s
}
