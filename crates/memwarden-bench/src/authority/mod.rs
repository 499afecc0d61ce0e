//! MEM-INV-Bench, the authority-layer benchmark (`memwarden bench authority`).
//!
//! 12 domains × 5 consequential tools; sleeper, control-flow and exfiltration attacks in benign,
//! static, adaptive and whitebox trigger styles; channels direct, L-a self-summary, L-b
//! trusted-tool echo and L-c fabricated corroboration; legitimate-elevation cases (k = 2
//! independent trusted attestations, or a user grant), uncorroborated cases and clean tasks. Each
//! case is played for real: the poison is written in session 0 through the engine and acted on
//! N sessions later, after benign sessions that write their own items. The defenses decide on
//! the stored items; memwarden's rows are `Engine::decide`.

pub mod defenses;
pub mod report;
pub mod scenario;
mod world;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

pub use report::{AuthorityReport, markdown};
pub use scenario::Scale;
pub use world::{Citation, full_decide};

use crate::BenchError;
use crate::agent::{Agent, AgentStats, ScriptedAgent, ScriptedParams};
use crate::openai::{OpenAiAgent, OpenAiAgentConfig};
use world::{CaseOutcome, World};

/// Which agent proposes the actions.
#[derive(Debug, Clone)]
pub enum AgentChoice {
    /// The deterministic scripted agent (default).
    Scripted(ScriptedParams),
    /// An OpenAI-compatible chat endpoint.
    OpenAi(OpenAiAgentConfig),
}

impl Default for AgentChoice {
    fn default() -> Self {
        AgentChoice::Scripted(ScriptedParams::default())
    }
}

impl AgentChoice {
    /// From the CLI's `--agent` value: `scripted` (default parameters) or `openai` (configured
    /// from the environment, see [`OpenAiAgentConfig::from_env`]).
    pub fn from_name(name: &str) -> Result<Self, BenchError> {
        match name {
            "scripted" => Ok(AgentChoice::default()),
            "openai" => Ok(AgentChoice::OpenAi(OpenAiAgentConfig::from_env().map_err(BenchError::Agent)?)),
            other => Err(BenchError::Invalid(format!("unknown agent {other:?} (expected scripted or openai)"))),
        }
    }

    /// `scripted` or `openai`.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentChoice::Scripted(_) => "scripted",
            AgentChoice::OpenAi(_) => "openai",
        }
    }

    fn build(&self, seed: u64, n: usize) -> Result<Vec<Box<dyn Agent>>, BenchError> {
        let n = n.max(1);
        match self {
            AgentChoice::Scripted(p) => Ok((0..n).map(|_| Box::new(ScriptedAgent::new(*p, seed)) as Box<dyn Agent>).collect()),
            AgentChoice::OpenAi(c) => {
                let a = OpenAiAgent::new(c.clone()).map_err(BenchError::Agent)?;
                Ok((0..n).map(|_| Box::new(a.clone()) as Box<dyn Agent>).collect())
            }
        }
    }
}

/// Options of an authority-benchmark run.
#[derive(Debug, Clone)]
pub struct AuthorityBenchOptions {
    /// `--quick`: 3 domains, every tool / attack type / style / channel, N = 0, 2, 8.
    pub quick: bool,
    /// Seed (default 7).
    pub seed: u64,
    /// The agent.
    pub agent: AgentChoice,
    /// Output directory (used by the CLI with [`write_authority`]).
    pub out: PathBuf,
    /// The git revision to stamp on the report (the CLI passes it).
    pub git_rev: Option<String>,
    /// Worker threads (default: 16 for the scripted agent, whose cases wait on group commits;
    /// 4 for an LLM endpoint).
    pub threads: Option<usize>,
    /// The content detector's threshold in the main table (default 50; the sweep covers 5-95).
    pub detector_tau: u32,
    /// Override the scale (tests use a small one); `None` follows `quick`.
    pub scale: Option<Scale>,
    /// Where to put the store (default: a temporary directory removed afterwards).
    pub data_dir: Option<PathBuf>,
    /// Play a stratified sample of at most this many cases ([`scenario::sample`]: every
    /// channel and kind of case takes turns), for agents that take seconds per step.
    pub max_cases: Option<usize>,
}

impl AuthorityBenchOptions {
    /// Defaults: full run, seed 7, scripted agent, report to `out`.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self { quick: false, seed: 7, agent: AgentChoice::default(), out: out.into(), git_rev: None, threads: None, detector_tau: 50, scale: None, data_dir: None, max_cases: None }
    }
}

enum Msg {
    Case(usize, Box<Result<CaseOutcome, BenchError>>),
    Done(AgentStats),
}

/// Run the authority benchmark. `progress(done, total)` is called on the calling thread after
/// every case (and once with `done = 0`).
pub fn run_authority(opts: &AuthorityBenchOptions, progress: &mut dyn FnMut(usize, usize)) -> Result<AuthorityReport, BenchError> {
    let started = Instant::now();
    let scale = opts.scale.clone().unwrap_or_else(|| if opts.quick { Scale::quick() } else { Scale::full() });
    if scale.persistence.is_empty() || scale.study_k.is_empty() {
        return Err(BenchError::Invalid("the scale needs at least one persistence point and one k".into()));
    }
    let cases = match opts.max_cases {
        Some(0) => return Err(BenchError::Invalid("max cases must be at least 1".into())),
        Some(n) => scenario::sample(scenario::cases(&scale), n, opts.seed),
        None => scenario::cases(&scale),
    };
    let world = World::open(opts.data_dir.as_deref(), opts.seed, &scale.study_k)?;
    let threads = opts.threads.unwrap_or(match opts.agent {
        AgentChoice::Scripted(_) => 16,
        AgentChoice::OpenAi(_) => 4,
    });
    let agents = opts.agent.build(opts.seed, threads.min(cases.len().max(1)))?;
    let agent_desc = agents.first().map(|a| a.describe()).unwrap_or_default();
    let total = cases.len();
    progress(0, total);
    let next = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let mut results: Vec<Option<CaseOutcome>> = (0..total).map(|_| None).collect();
    let mut stats: Vec<AgentStats> = Vec::new();
    let mut first_err: Option<BenchError> = None;
    let (tx, rx) = mpsc::channel::<Msg>();
    std::thread::scope(|s| {
        for mut agent in agents {
            let tx = tx.clone();
            let (world, cases, next, abort) = (&world, &cases, &next, &abort);
            let (seed, tau) = (opts.seed, opts.detector_tau);
            s.spawn(move || {
                while !abort.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else {
                        break;
                    };
                    let r = world.run_case(agent.as_mut(), case, seed, tau);
                    if tx.send(Msg::Case(i, Box::new(r))).is_err() {
                        break;
                    }
                }
                let _ = tx.send(Msg::Done(agent.stats()));
            });
        }
        drop(tx);
        let mut done = 0usize;
        for msg in rx {
            match msg {
                Msg::Case(i, r) => match *r {
                    Ok(o) => {
                        if let Some(slot) = results.get_mut(i) {
                            *slot = Some(o);
                        }
                        done += 1;
                        progress(done, total);
                    }
                    Err(e) => {
                        abort.store(true, Ordering::Relaxed);
                        first_err.get_or_insert(e);
                    }
                },
                Msg::Done(st) => stats.push(st),
            }
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    let outcomes: Vec<CaseOutcome> = results.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| BenchError::Invalid("a case produced no result".into()))?;
    let agent_stats = match opts.agent {
        // Scripted agents count per worker; OpenAI clones share one set of counters.
        AgentChoice::Scripted(_) => stats.iter().fold(AgentStats::default(), |a, s| AgentStats { calls: a.calls + s.calls, failures: a.failures + s.failures, tokens: a.tokens + s.tokens }),
        AgentChoice::OpenAi(_) => stats.iter().fold(AgentStats::default(), |a, s| AgentStats { calls: a.calls.max(s.calls), failures: a.failures.max(s.failures), tokens: a.tokens.max(s.tokens) }),
    };
    // Latency, single-threaded: up to 1,000 gate samples and 300 engine samples, spread evenly
    // over the cases (deterministic choice; the times themselves are not).
    let probes: Vec<&(memwarden_core::ids::TenantId, memwarden_core::action::ActionRequest)> = outcomes.iter().filter_map(|o| o.probe.as_ref()).collect();
    let stride = probes.len().div_ceil(1_000).max(1);
    let mut latency = (Vec::new(), Vec::new(), Vec::new());
    for (j, (tenant, a)) in probes.iter().step_by(stride).enumerate() {
        let (cold, warm, engine) = world.time_decisions(tenant, a, j < 300)?;
        latency.0.push(cold);
        latency.1.push(warm);
        latency.2.extend(engine);
    }
    let verify = world.engine().verify_log()?;
    let meta = report::Meta {
        agent: agent_desc,
        agent_kind: opts.agent.kind().into(),
        seed: opts.seed,
        quick: opts.quick,
        git_rev: opts.git_rev.clone(),
        wall_time_s: 0.0,
        sampled_from: opts.max_cases.map(|_| scenario::cases(&scale).len()),
        scale,
        tau: opts.detector_tau,
        agent_stats,
        log_verified: verify.is_ok(),
        log_entries: verify.entries,
        latency,
    };
    let mut report = report::aggregate(&outcomes, meta);
    report.wall_time_s = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    Ok(report)
}

/// Write `DIR/authority.json` and `DIR/authority.md` (creating `dir`); returns both paths.
pub fn write_authority(report: &AuthorityReport, dir: &Path) -> Result<(PathBuf, PathBuf), BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let json_path = dir.join("authority.json");
    let md_path = dir.join("authority.md");
    let json = serde_json::to_string_pretty(report).map_err(|e| BenchError::Io(format!("cannot encode the report: {e}")))?;
    std::fs::write(&json_path, json + "\n").map_err(|e| BenchError::Io(format!("cannot write {}: {e}", json_path.display())))?;
    std::fs::write(&md_path, markdown(report)).map_err(|e| BenchError::Io(format!("cannot write {}: {e}", md_path.display())))?;
    Ok((json_path, md_path))
}
