//! One run of the multi-agent poisoning simulation: N agents (some attacker-controlled) on a
//! communication graph, a private store per agent plus a shared store, a stream of tasks played
//! in R rounds with hand-off summaries between neighbours, benign promotion, both attack routes,
//! and the memory layer of one [`Variant`].
//!
//! The memory layer is in-process: every write, read, promotion and cross-agent entry calls
//! memwarden-lifecycle's pure gate functions on the items' [`LifecycleMemory`] view; `full` adds
//! memwarden-core's authority gate ([`super::authority`]): labels from the authenticated writer
//! and its session, promotion within the ancestry, and Algorithm 1 on consequential tool choices.
//! The engine / store integration is pending: nothing here goes through `Engine` or
//! `SqliteStore`.
//!
//! The gates never see what the evaluator knows: `poisoned` flags, attacker identities and the
//! correct answers are kept beside the items for the metrics only. Outcome feedback is the
//! evaluator's task result for the agent that used an item — never a statement about which item
//! is poisoned.

use std::collections::HashMap;

use memwarden_core::action::Decision as Verdict;
use memwarden_core::ids::{ItemId, PrincipalId};
use memwarden_core::item::{GuardState, Readers, Route, Status, Taint};
use memwarden_core::session::Observed;
use memwarden_lifecycle::{
    BrokerOutcome, BrokerRequest, FeedbackState, InitialCondition, LifecycleConfig, LifecycleMemory, LifecycleScope, Outcome,
    PromotionOutcome, PromotionTarget, Restrictions, RetrievalCandidate, RetrievalOutcome, RetrievalQuery, RiskScorer, WriteOutcome,
    broker, compose_text, derive_and_write_gate, feedback, initial_guard, promotion_gate, retrieval_gate,
};

use super::agent::{ContextEntry, DecisionInput, EntryKind, LifecycleAgent};
use super::metrics::{self, OutputRecord, Trace};
use super::settings::{
    ExperienceOutcome, MemoryText, Pushed, Rationale, Setting, SettingSpec, Stance, Stream, Task, attacker_experience, attacker_pitch,
    benign_experience, benign_message, direct_poison, external_snippet, query_only_poison, tips,
};
use super::authority::{AuthorWrite, AuthorityLayer, Writer};
use super::topology::{Graph, Topology};
use super::variant::{FeedbackMode, GateSet, Variant};
use crate::BenchError;
use crate::stats::{Rng, derive_seed};

/// Owner index of user-history items.
const USER: usize = usize::MAX;
/// Per-task chance that one accepted benign agent promotes its post-task experience, and
/// (separately) one of the private items that supported its answer (the paper's runner: rate
/// .10, one agent).
const PROMOTION_RATE: f64 = 0.10;
/// Chance that a benign hand-off says it was double-checked / verified.
const VERIFIED_PHRASE: f64 = 0.3;
/// Chance that an experience carries an everyday tip.
const TIP_RATE: f64 = 0.3;
/// Weight of utility in the plain (ungated) retrieval ranking `sim + w q`.
const PLAIN_Q_WEIGHT: f64 = 0.3;

/// The scorers and feedback configurations a run needs (built once, shared by all runs).
#[derive(Debug)]
pub struct Scorers {
    short: RiskScorer,
    long: RiskScorer,
    handoff: RiskScorer,
    feedback_full: LifecycleConfig,
    feedback_noq: LifecycleConfig,
    feedback_norep: LifecycleConfig,
}

impl Scorers {
    /// The specification's configuration (keep 3), the long-history preset (keep 16), a hand-off
    /// screen that keeps every survivor, and the feedback configurations (`q` on / frozen).
    pub fn new() -> Result<Self, BenchError> {
        let err = |e: memwarden_lifecycle::LifecycleError| BenchError::Invalid(format!("lifecycle configuration: {e}"));
        let rules = memwarden_lifecycle::RuleSet::english();
        let short = RiskScorer::new(LifecycleConfig::default(), &rules).map_err(err)?;
        let long = RiskScorer::new(LifecycleConfig::long_history_qa(), &rules).map_err(err)?;
        let mut h = LifecycleConfig::default();
        h.retrieval.keep_top_n = 64;
        let handoff = RiskScorer::new(h, &rules).map_err(err)?;
        let mut noq = LifecycleConfig::default();
        noq.feedback.update_q = false;
        let mut norep = LifecycleConfig::default();
        norep.feedback.reputation_success = 0.0;
        norep.feedback.reputation_failure = 0.0;
        Ok(Self { short, long, handoff, feedback_full: LifecycleConfig::default(), feedback_noq: noq, feedback_norep: norep })
    }
}

/// What one run simulates.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// The setting.
    pub setting: Setting,
    /// The topology.
    pub topology: Topology,
    /// The memory layer.
    pub variant: Variant,
    /// Agents.
    pub agents: usize,
    /// Attacker-controlled agents among them (0: attack-free).
    pub attackers: usize,
    /// Rounds per task.
    pub rounds: usize,
    /// The run's seed (graph, attacker choice, agent draws; the same for every variant).
    pub seed: u64,
    /// Attackers take part in the dialogue (hand-offs). `false` isolates the memory routes:
    /// attackers stay silent and poison only through memory writes.
    pub dialogue_attacks: bool,
}

#[derive(Debug, Clone)]
struct SimItem {
    mem: LifecycleMemory,
    owner: usize,
    writer: Option<usize>,
    /// How the authority layer admits it (`full` only).
    author: AuthorWrite,
    /// Its authority record, once admitted (`full` only).
    record: Option<ItemId>,
    stance: Option<Stance>,
    poisoned: bool,
    committed: bool,
    shared: bool,
    tokens: Vec<u32>,
    origin: &'static str,
}

/// A current (non-memory) input of a task: a tool output or a search result.
#[derive(Debug, Clone)]
struct Obs {
    text: String,
    stance: Option<Stance>,
    injected: bool,
    /// A tool output (else a search result).
    tool: bool,
    /// Its authority record (`full` only).
    record: Option<ItemId>,
}

/// An agent's output in one round.
#[derive(Debug, Clone)]
struct Out {
    answer: Option<usize>,
    message: String,
    stance: Option<Stance>,
    poisoned: bool,
    /// The agent's session when it produced the output (`full` only): its hand-offs are
    /// written from it.
    session: Option<Observed>,
    carried: Restrictions,
    rationale: Rationale,
}

#[derive(Debug, Default, Clone)]
struct AgentCtx {
    retrieved: Vec<usize>,
    observations: Vec<Obs>,
    handoffs: Vec<usize>,
    used: Vec<usize>,
    pool_poison: u64,
    kept_poison: u64,
}

/// Similarity tokens: lowercase alphanumeric words of 3+ characters minus a stop list, hashed.
pub fn tokens(text: &str) -> Vec<u32> {
    const STOP: &[&str] = &[
        "the", "and", "for", "with", "this", "that", "from", "what", "which", "option", "answer", "user", "task", "agent", "note", "memory",
        "experience", "outcome", "correct", "verified", "chose", "round", "hand", "off", "evaluator", "stored", "says", "question",
        "reference", "page", "excerpt", "history", "session", "chat", "unverified", "historical", "only", "not", "instruction", "was",
        "are", "you", "your", "our", "its", "his", "her", "they", "them", "should", "would", "could", "did", "does", "has", "have",
        "will", "into", "about", "like", "next", "take", "action", "api", "app",
    ];
    let mut out: Vec<u32> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| {
            // FNV-1a.
            let mut h: u32 = 0x811c_9dc5;
            for b in w.bytes() {
                h ^= u32::from(b);
                h = h.wrapping_mul(0x0100_0193);
            }
            h
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Cosine similarity of two token sets.
pub fn similarity(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut n) = (0, 0, 0u32);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    f64::from(n) / ((a.len() * b.len()) as f64).sqrt()
}

/// The route the lifecycle layer scores an explicit write on the API's `direct` route by: the
/// writer's own output, a post-task experience. This mirrors `lifecycle_route` in
/// memwarden-engine (a private function there), so the simulation's direct-memory plants are
/// scored the way the engine scores them.
pub fn direct_write_route() -> Route {
    Route::PostTaskExperience
}

/// Pick the attackers of a run: `k` of `n` agents, seeded (the same for every variant).
pub fn choose_attackers(n: usize, k: usize, seed: u64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..n).collect();
    Rng::new(derive_seed(seed, 0xa77a_c4e5)).shuffle(&mut order);
    let mut out = vec![false; n];
    for &i in order.iter().take(k.min(n)) {
        out[i] = true;
    }
    out
}

/// The communication graph of a run.
pub fn run_graph(spec: &RunSpec) -> Graph {
    let mut rng = Rng::new(derive_seed(spec.seed, 0x6a4f_0000 + spec.topology as u64));
    Graph::build(spec.topology, spec.agents, &mut rng)
}

struct World<'a> {
    setting: Setting,
    sspec: SettingSpec,
    gates: GateSet,
    fb: FeedbackMode,
    rounds: usize,
    scorer: &'a RiskScorer,
    hscorer: &'a RiskScorer,
    fcfg: &'a LifecycleConfig,
    graph: Graph,
    is_attacker: Vec<bool>,
    attackers: Vec<usize>,
    benign: Vec<usize>,
    principals: Vec<PrincipalId>,
    user: PrincipalId,
    items: Vec<SimItem>,
    private: Vec<Vec<usize>>,
    postings: HashMap<u32, Vec<usize>>,
    scratch: Vec<u32>,
    reputation: Vec<f64>,
    trace: Trace,
    base_seed: u64,
    attack: bool,
    dialogue_attacks: bool,
    /// The authority layer (`full` only).
    auth: Option<AuthorityLayer>,
    /// The first error of the authority layer (a simulation bug; fails the run).
    error: Option<BenchError>,
    /// The current task's query (for the shadow retrieval checks).
    query: String,
    /// Logical clock for authority records (ms).
    clock_ms: u64,
}

/// Run one simulation. `agent` answers for every benign agent (its draws are seeded per
/// task, agent and round).
pub fn run(spec: &RunSpec, stream: &Stream, scorers: &Scorers, agent: &mut dyn LifecycleAgent) -> Result<Trace, BenchError> {
    if spec.agents == 0 || spec.agents > 64 || spec.attackers >= spec.agents || spec.rounds == 0 || spec.rounds > 8 {
        return Err(BenchError::Invalid(format!(
            "run needs 1-64 agents, fewer attackers than agents and 1-8 rounds (got {} agents, {} attackers, {} rounds)",
            spec.agents, spec.attackers, spec.rounds
        )));
    }
    let sspec = spec.setting.spec();
    let principals = (0..spec.agents)
        .map(|i| PrincipalId::new(&format!("agent-{i}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BenchError::Invalid(format!("principal: {e}")))?;
    let user = PrincipalId::new("user").map_err(|e| BenchError::Invalid(format!("principal: {e}")))?;
    let is_attacker = choose_attackers(spec.agents, spec.attackers, spec.seed);
    let attackers: Vec<usize> = (0..spec.agents).filter(|i| is_attacker[*i]).collect();
    let benign: Vec<usize> = (0..spec.agents).filter(|i| !is_attacker[*i]).collect();
    let fb = spec.variant.feedback();
    let mut w = World {
        setting: spec.setting,
        sspec,
        gates: spec.variant.gates(),
        fb,
        rounds: spec.rounds,
        scorer: if sspec.keep_top_n > 3 { &scorers.long } else { &scorers.short },
        hscorer: &scorers.handoff,
        fcfg: match fb {
            FeedbackMode::NoQ => &scorers.feedback_noq,
            FeedbackMode::NoReputation => &scorers.feedback_norep,
            FeedbackMode::Full | FeedbackMode::Off => &scorers.feedback_full,
        },
        graph: run_graph(spec),
        is_attacker,
        attackers,
        benign,
        principals,
        user,
        items: Vec::new(),
        private: vec![Vec::new(); spec.agents],
        postings: HashMap::new(),
        scratch: Vec::new(),
        reputation: vec![0.5; spec.agents],
        trace: Trace::new(spec.rounds),
        base_seed: derive_seed(spec.seed, 0xba5e_0000 + spec.setting as u64 + 16 * spec.topology as u64 + 256 * spec.agents as u64),
        attack: spec.attackers > 0,
        dialogue_attacks: spec.dialogue_attacks,
        auth: if spec.variant.gates().authority { Some(AuthorityLayer::new(spec.agents)?) } else { None },
        error: None,
        query: String::new(),
        clock_ms: 1_000,
    };
    w.load_history(stream);
    for task in &stream.tasks {
        w.play(task, agent);
        if let Some(e) = w.error.take() {
            return Err(e);
        }
    }
    for probe in &stream.probes {
        w.play(probe, agent);
        if let Some(e) = w.error.take() {
            return Err(e);
        }
    }
    w.finish();
    Ok(w.trace)
}

impl World<'_> {
    fn principal(&self, i: usize) -> &PrincipalId {
        self.principals.get(i).unwrap_or(&self.user)
    }

    fn load_history(&mut self, stream: &Stream) {
        for f in &stream.history {
            let mut mem = LifecycleMemory::new(
                self.user.clone(),
                compose_text("User history", &f.text),
                Route::Dialogue,
                // The user-history channel: core's neutral initial state for a trusted origin.
                GuardState { q: 0.0, tau: 0.5, h: 0.15, taint: Taint::Clean, successes: 0, failures: 0, risk: 0.0, reports: Vec::new() },
            );
            mem.scope = LifecycleScope::Team;
            mem.readers = Readers::All;
            mem.memory_type = "user_history".to_owned();
            let stance = f.answer.as_ref().map(|a| Stance { pushed: Pushed::Text(a.clone()), about: Some(f.qid), assertive: false });
            let item = SimItem {
                mem,
                owner: USER,
                writer: None,
                author: AuthorWrite::new(Writer::User),
                record: None,
                stance,
                poisoned: false,
                committed: false,
                shared: true,
                tokens: Vec::new(),
                origin: "history",
            };
            self.store(item);
        }
    }

    /// Build an item (not stored yet). `author` says how the authority layer admits it (used
    /// by `full` only).
    #[allow(clippy::too_many_arguments)]
    fn item(
        &self,
        owner: usize,
        writer: Option<usize>,
        text: MemoryText,
        route: Route,
        guard: GuardState,
        author: AuthorWrite,
        poisoned: bool,
        parents: Vec<String>,
        carried: Restrictions,
    ) -> SimItem {
        let mut mem = LifecycleMemory::new(self.principal(owner).clone(), compose_text(&text.intent, &text.body), route, guard);
        mem.source_tags = text.tags;
        mem.memory_type = text.memory_type.to_owned();
        mem.parents = parents;
        mem.source_agent_trust = writer.and_then(|w| self.reputation.get(w).copied());
        mem.carried = carried;
        SimItem {
            mem,
            owner,
            writer,
            author,
            record: None,
            stance: text.stance,
            poisoned,
            committed: false,
            shared: false,
            tokens: Vec::new(),
            origin: "other",
        }
    }

    /// The next logical time (ms) for an authority record or decision.
    fn tick(&mut self) -> u64 {
        self.clock_ms += 1;
        self.clock_ms
    }

    /// Admit `w` through the authority layer (`full` only); the first error fails the run.
    fn admit(&mut self, w: &AuthorWrite, route: Route, text: &str) -> Option<ItemId> {
        let now = self.tick();
        let auth = self.auth.as_mut()?;
        match auth.admit(w, route, text, now) {
            Ok(id) => Some(id),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    /// Hand record `rec` to agent `i`'s session (`full` only).
    fn observe(&mut self, i: usize, rec: Option<ItemId>) {
        if let (Some(auth), Some(rec)) = (self.auth.as_mut(), rec) {
            auth.observe(i, rec);
        }
    }

    /// Agent `i`'s current session (`full` only).
    fn session(&self, i: usize) -> Option<Observed> {
        self.auth.as_ref().map(|a| a.session(i))
    }

    /// The write path: derive trust and hazard, run the write gate (if on), store what it admits
    /// or holds back. Returns the item's id unless it was rejected.
    fn store(&mut self, mut item: SimItem) -> Option<usize> {
        let mut outcome = WriteOutcome::Allow;
        if self.gates.scored {
            let d = derive_and_write_gate(self.scorer, &item.mem);
            if self.gates.write {
                outcome = d.outcome;
                d.apply(&mut item.mem);
            } else if let Some(rec) = &d.derivation {
                item.mem.guard.tau = rec.tau;
                item.mem.guard.h = rec.h;
                item.mem.guard.risk = d.signals.as_ref().map(|s| s.total).unwrap_or(0.0);
            }
        }
        let k = match outcome {
            WriteOutcome::Allow => 0,
            WriteOutcome::Rewrite => 1,
            WriteOutcome::Quarantine => 2,
            WriteOutcome::Reject => 3,
        };
        self.origin_of(&item).writes[k] += 1;
        if item.poisoned {
            self.trace.gates.poison_writes[k] += 1;
            self.trace.poison_attempts += 1;
        } else {
            self.trace.gates.benign_writes[k] += 1;
        }
        if outcome == WriteOutcome::Reject {
            return None;
        }
        if outcome == WriteOutcome::Quarantine && item.poisoned && self.gates.retrieval {
            // Shadow check (diagnostics only): would the retrieval gate have kept this poison out
            // of its owner's prompt anyway, had the write gate let it in?
            let blocked = self.read_would_block(&item.mem, item.owner);
            let g = &mut self.trace.gates;
            if blocked {
                g.poison_write_held_read_would_block += 1;
            } else {
                g.poison_write_held_read_would_pass += 1;
                self.origin_of(&item).write_held_read_would_pass += 1;
            }
        }
        if self.auth.is_some() {
            let author = item.author.clone();
            let text = item.mem.text.clone();
            item.record = self.admit(&author, item.mem.route, &text);
        }
        item.committed = item.mem.status == Status::Active;
        if item.poisoned && item.committed {
            self.trace.poison_committed += 1;
        }
        item.tokens = tokens(&item.mem.text);
        let id = self.items.len();
        for t in &item.tokens {
            self.postings.entry(*t).or_default().push(id);
        }
        if let Some(list) = self.private.get_mut(item.owner)
            && !item.shared
        {
            list.push(id);
        }
        self.items.push(item);
        Some(id)
    }

    /// Whether the retrieval gate would block an active copy of `mem` for `agent` on the current
    /// task's query (diagnostics of the write and promotion gates; decides nothing).
    fn read_would_block(&self, mem: &LifecycleMemory, agent: usize) -> bool {
        let mut m = mem.clone();
        m.status = Status::Active;
        let sim = similarity(&tokens(&self.query), &tokens(&m.text));
        let principal = self.principal(agent).clone();
        let q = RetrievalQuery { agent: &principal, task_class: Some(self.sspec.task_class), text: &self.query };
        let res = retrieval_gate(self.scorer, &q, &[RetrievalCandidate { memory: &m, similarity: sim }]);
        res.decisions.first().is_none_or(|d| d.outcome == RetrievalOutcome::Block)
    }

    fn reachable(&self, id: usize, agent: usize) -> bool {
        self.items.get(id).is_some_and(|it| it.mem.status == Status::Active && it.mem.scope.is_open() && (it.shared || it.owner == agent))
    }

    fn refresh_trust(&mut self, ids: &[usize]) {
        for &id in ids {
            if let Some(it) = self.items.get_mut(id)
                && let Some(w) = it.writer
            {
                it.mem.source_agent_trust = self.reputation.get(w).copied();
            }
        }
    }

    fn origin_of(&mut self, item: &SimItem) -> &mut metrics::OriginCounts {
        let key = format!("{}:{}", if item.poisoned { "poison" } else { "benign" }, item.origin);
        self.trace.origins.entry(key).or_default()
    }

    fn origin_by_id(&mut self, id: usize) -> Option<&mut metrics::OriginCounts> {
        let key = self.items.get(id).map(|it| format!("{}:{}", if it.poisoned { "poison" } else { "benign" }, it.origin))?;
        Some(self.trace.origins.entry(key).or_default())
    }

    fn count_admitted(&mut self, ids: &[usize]) {
        for &id in ids {
            if let Some(o) = self.origin_by_id(id) {
                o.admitted += 1;
            }
        }
    }

    fn count_surfaced(&mut self, id: usize, blocked: bool) {
        if let Some(o) = self.origin_by_id(id) {
            o.surfaced += 1;
            o.blocked += u64::from(blocked);
        }
        let poisoned = self.items.get(id).is_some_and(|i| i.poisoned);
        let g = &mut self.trace.gates;
        if poisoned {
            g.poison_surfaced += 1;
            g.poison_blocked += u64::from(blocked);
        } else {
            g.benign_surfaced += 1;
            g.benign_blocked += u64::from(blocked);
        }
    }

    /// Cross-agent broker: keep the ids the broker admits for `agent` (items it owns pass).
    fn brokered(&mut self, ids: Vec<usize>, agent: usize, blocked: &mut Vec<usize>) -> Vec<usize> {
        if !self.gates.broker {
            return ids;
        }
        let class = self.sspec.task_class;
        let mut keep = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(it) = self.items.get(id) else {
                continue;
            };
            if it.owner == agent {
                keep.push(id);
                continue;
            }
            let req = BrokerRequest { agent: self.principal(agent), task_class: Some(class) };
            if broker(self.scorer, &it.mem, &req).outcome == BrokerOutcome::Admit {
                keep.push(id);
            } else {
                self.trace.gates.broker_blocked += 1;
                blocked.push(id);
            }
        }
        keep
    }

    /// Screen `(id, similarity)` candidates for `agent`: retrieval gate (if on) with `scorer`,
    /// else plain `sim + w q` ranking; keep `keep`. Returns (kept ids, firewall-blocked ids).
    fn screen(&mut self, cands: &[(usize, f64)], agent: usize, query: &str, keep: usize) -> (Vec<usize>, Vec<usize>) {
        self.screen_with(cands, agent, query, false, keep)
    }

    /// [`Self::screen`] with the choice of scorer (`handoff`: keep every survivor).
    fn screen_with(&mut self, cands: &[(usize, f64)], agent: usize, query: &str, handoff: bool, keep: usize) -> (Vec<usize>, Vec<usize>) {
        let ids: Vec<usize> = cands.iter().map(|c| c.0).collect();
        self.refresh_trust(&ids);
        if !self.gates.retrieval {
            let mut ranked: Vec<(usize, f64)> = cands
                .iter()
                .filter_map(|(id, sim)| self.items.get(*id).map(|it| (*id, sim + PLAIN_Q_WEIGHT * it.mem.guard.q)))
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(keep);
            return (ranked.into_iter().map(|r| r.0).collect(), Vec::new());
        }
        let scorer = if handoff { self.hscorer } else { self.scorer };
        let principal = self.principal(agent).clone();
        let q = RetrievalQuery { agent: &principal, task_class: Some(self.sspec.task_class), text: query };
        let list: Vec<RetrievalCandidate<'_>> = cands
            .iter()
            .filter_map(|(id, sim)| self.items.get(*id).map(|it| RetrievalCandidate { memory: &it.mem, similarity: *sim }))
            .collect();
        let res = retrieval_gate(scorer, &q, &list);
        let kept: Vec<usize> = res.kept.iter().filter_map(|k| ids.get(*k).copied()).take(keep).collect();
        let blocked: Vec<usize> =
            res.decisions.iter().filter(|d| d.outcome == RetrievalOutcome::Block).filter_map(|d| ids.get(d.index).copied()).collect();
        (kept, blocked)
    }

    /// Retrieval for `agent`: similarity candidates from its private store and the shared store,
    /// then the broker and the retrieval gate.
    fn retrieve(&mut self, agent: usize, query: &str, qtok: &[u32]) -> (Vec<usize>, u64, u64) {
        if self.scratch.len() < self.items.len() {
            self.scratch.resize(self.items.len(), 0);
        }
        let mut touched: Vec<usize> = Vec::new();
        for t in qtok {
            if let Some(list) = self.postings.get(t) {
                for &id in list {
                    if let Some(c) = self.scratch.get_mut(id) {
                        if *c == 0 {
                            touched.push(id);
                        }
                        *c += 1;
                    }
                }
            }
        }
        let mut cands: Vec<(usize, f64)> = Vec::with_capacity(touched.len());
        for id in touched {
            let n = self.scratch.get(id).copied().unwrap_or(0);
            if let Some(c) = self.scratch.get_mut(id) {
                *c = 0;
            }
            if !self.reachable(id, agent) {
                continue;
            }
            let m = self.items.get(id).map(|i| i.tokens.len()).unwrap_or(0);
            if m > 0 && !qtok.is_empty() {
                cands.push((id, f64::from(n) / ((qtok.len() * m) as f64).sqrt()));
            }
        }
        cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        cands.truncate(self.sspec.preselect);
        let pool_poison = cands.iter().filter(|c| self.items.get(c.0).is_some_and(|i| i.poisoned)).count() as u64;
        let mut blocked = Vec::new();
        let ids = self.brokered(cands.iter().map(|c| c.0).collect(), agent, &mut blocked);
        let cands: Vec<(usize, f64)> = cands.into_iter().filter(|c| ids.contains(&c.0)).collect();
        let (kept, fw) = self.screen(&cands, agent, query, self.sspec.keep_top_n);
        blocked.extend(fw);
        let all: Vec<usize> = cands.iter().map(|c| c.0).chain(blocked.iter().copied()).collect();
        let mut seen = Vec::new();
        for id in all {
            if !seen.contains(&id) {
                seen.push(id);
                self.count_surfaced(id, blocked.contains(&id));
            }
        }
        let kept_poison = kept.iter().filter(|id| self.items.get(**id).is_some_and(|i| i.poisoned)).count() as u64;
        self.count_admitted(&kept);
        (kept, pool_poison, kept_poison)
    }

    fn draw(&self, task: &Task, purpose: u64, agent: usize) -> f64 {
        Rng::new(derive_seed(self.base_seed, (task.index as u64) << 20 | purpose << 8 | agent as u64)).next_f64()
    }

    /// Play one task (or probe): attacks, retrieval, rounds with hand-offs, then (tasks only)
    /// feedback, stored observations, experiences and promotions.
    fn play(&mut self, task: &Task, agent: &mut dyn LifecycleAgent) {
        let n = self.principals.len();
        let query = task.query();
        let qtok = tokens(&query);
        self.query.clone_from(&query);
        if let Some(a) = self.auth.as_mut() {
            a.begin_task();
        }
        let attacking = self.attack && !task.warmup && !task.probe;
        if attacking {
            self.plant(task);
        }
        // Round-1 context: retrieval (once per task) and current observations.
        let mut ctx: Vec<AgentCtx> = vec![AgentCtx::default(); n];
        for &i in &self.benign.clone() {
            let (kept, pool_poison, kept_poison) = self.retrieve(i, &query, &qtok);
            for id in &kept {
                let rec = self.items.get(*id).and_then(|it| it.record);
                self.observe(i, rec);
            }
            let mut observations = Vec::new();
            if let Some(o) = &task.observation {
                // Without attackers nobody injects: the tool returns its clean output.
                let (text, injected) = if self.attack { (o.text.clone(), o.injected) } else { (o.clean.clone(), false) };
                let stance = injected.then(|| Stance {
                    pushed: Pushed::Text(task.options.get(task.target).cloned().unwrap_or_default()),
                    about: Some(task.qid),
                    assertive: true,
                });
                observations.push(Obs { text, stance, injected, tool: true, record: None });
            }
            if task.external_for(i, self.sspec.p_external) && !task.probe {
                let s = external_snippet(self.setting, task);
                observations.push(Obs { text: compose_text(&s.intent, &s.body), stance: s.stance, injected: false, tool: false, record: None });
            }
            if self.auth.is_some() {
                for o in &mut observations {
                    let (writer, route) = if o.tool { (Writer::Tool, Route::ToolObservation) } else { (Writer::Web, Route::ExternalObservation) };
                    o.record = self.admit(&AuthorWrite::new(writer).readers(vec![i]), route, &o.text);
                    self.observe(i, o.record);
                }
            }
            let c = &mut ctx[i];
            c.used.extend(kept.iter().copied());
            c.retrieved = kept;
            c.pool_poison = pool_poison;
            c.kept_poison = kept_poison;
            c.observations = observations;
        }
        let mut outs: Vec<Option<Out>> = vec![None; n];
        for round in 1..=self.rounds {
            if round > 1 {
                for &i in &self.benign.clone() {
                    let delivered = self.deliver(task, &query, &qtok, round, i, &outs);
                    for id in &delivered {
                        let rec = self.items.get(*id).and_then(|it| it.record);
                        self.observe(i, rec);
                    }
                    let c = &mut ctx[i];
                    c.used.extend(delivered.iter().copied());
                    c.handoffs = delivered;
                }
            }
            let mut next: Vec<Option<Out>> = Vec::with_capacity(n);
            for i in 0..n {
                let prev = outs.get(i).and_then(|o| o.as_ref()).and_then(|o| o.answer);
                let out = if self.is_attacker.get(i).copied().unwrap_or(false) {
                    self.attacker_out(task, i, attacking)
                } else {
                    let empty = AgentCtx::default();
                    let c = ctx.get(i).unwrap_or(&empty);
                    self.benign_out(task, i, round, c, prev, agent)
                };
                next.push(Some(out));
            }
            outs = next;
        }
        if !task.probe {
            self.after_task(task, &ctx, &outs);
        }
    }

    /// The attackers' plants for this task: a direct-memory item pushed into the shared store,
    /// a query-only interaction consolidated into a benign agent's memory.
    fn plant(&mut self, task: &Task) {
        let na = self.attackers.len();
        if na == 0 {
            return;
        }
        if let Some((slot, template)) = task.plan.direct
            && let Some(&a) = self.attackers.get(slot % na)
        {
            let mut text = direct_poison(self.setting, task, template);
            // An attacker-controlled agent is an ordinary agent principal making an explicit write
            // to its own store on the API's `direct` route. memwarden's write path gives it core's
            // initial state for an agent-level write (q 0, trust .5, hazard .15, clean) and the
            // lifecycle layer scores it as the writer's own output (`direct_write_route`), not as
            // the paper's "direct memory injection" (a write that bypassed the agent, which
            // memwarden's doors do not have). The memory type is the memory manager's, and an
            // explicit write has none.
            text.memory_type = "";
            let guard = GuardState { q: 0.0, tau: 0.5, h: 0.15, taint: Taint::Clean, successes: 0, failures: 0, risk: 0.0, reports: Vec::new() };
            let mut author = AuthorWrite::new(Writer::Agent(a)).readers(vec![a]);
            author.route = Some(Route::Direct);
            let mut item = self.item(a, Some(a), text, direct_write_route(), guard, author, true, Vec::new(), Restrictions::default());
            item.origin = "direct";
            if let Some(id) = self.store(item) {
                self.promote(id, a);
            }
        }
        if let Some((slot, victim, template)) = task.plan.query_only
            && self.attackers.get(slot % na).is_some()
            && !self.benign.is_empty()
        {
            let v = self.benign.get((victim % self.benign.len() as u64) as usize).copied().unwrap_or(0);
            let text = query_only_poison(task, template);
            let guard = initial_guard(self.fcfg, InitialCondition::DialogueHandoff);
            // The attacker is an outside user of the victim (a source): the victim's memory
            // manager consolidates the conversation into a note derived from that message.
            let mut author = AuthorWrite::new(Writer::Agent(v)).readers(vec![v]);
            if self.auth.is_some() {
                let message = format!("Outside user's questions with hints about {}", task.cues);
                if let Some(m) = self.admit(&AuthorWrite::new(Writer::Outside), Route::ExternalObservation, &message) {
                    author.parents.push(m);
                }
            }
            let mut item = self.item(v, None, text, Route::Dialogue, guard, author, true, Vec::new(), Restrictions::default());
            item.origin = "query_only";
            self.store(item);
        }
    }

    /// Write the hand-off summaries of `receiver`'s neighbours' previous-round outputs into its
    /// private store and return those admitted into its round-`round` context.
    fn deliver(&mut self, task: &Task, query: &str, qtok: &[u32], round: usize, receiver: usize, outs: &[Option<Out>]) -> Vec<usize> {
        let neighbours: Vec<usize> = self.graph.neighbours(receiver).to_vec();
        let mut stored: Vec<usize> = Vec::new();
        for j in neighbours {
            let Some(Some(o)) = outs.get(j) else {
                continue;
            };
            if !self.dialogue_attacks && self.is_attacker.get(j).copied().unwrap_or(false) {
                continue;
            }
            let text = MemoryText {
                intent: format!("Hand-off from agent {j} (round {}) on '{}'", round - 1, task.short()),
                body: o.message.clone(),
                memory_type: "handoff_summary",
                tags: Vec::new(),
                stance: o.stance.clone(),
            };
            let carried = if self.gates.broker { o.carried.clone() } else { Restrictions::default() };
            let guard = initial_guard(self.fcfg, InitialCondition::DialogueHandoff);
            // Written by the sender from the session it answered in, for the receiver.
            let mut author = AuthorWrite::new(Writer::Agent(j)).readers(vec![receiver]);
            author.observed = o.session.clone();
            let mut item = self.item(receiver, Some(j), text, Route::MemoryHandoff, guard, author, o.poisoned, vec!["agent_output".to_owned()], carried);
            item.origin = if o.poisoned && self.is_attacker.get(j).copied().unwrap_or(false) {
                "pitch_handoff"
            } else if o.poisoned {
                "echo_handoff"
            } else {
                "handoff"
            };
            if let Some(id) = self.store(item) {
                stored.push(id);
            }
        }
        // The hand-off enters the receiver's context through memwarden's read path: the broker
        // (it derives from another agent: scope, status, carried restrictions) and the retrieval
        // gate's firewall (every survivor kept: hand-offs are not ranked against each other).
        let class = self.sspec.task_class;
        let mut admitted: Vec<(usize, f64)> = Vec::new();
        let mut blocked: Vec<usize> = Vec::new();
        for id in stored.iter().copied() {
            let admit = if self.gates.broker {
                let req = BrokerRequest { agent: self.principal(receiver), task_class: Some(class) };
                self.items.get(id).is_some_and(|it| broker(self.scorer, &it.mem, &req).outcome == BrokerOutcome::Admit)
            } else {
                true
            };
            if admit {
                let sim = self.items.get(id).map(|it| similarity(qtok, &it.tokens)).unwrap_or(0.0);
                admitted.push((id, sim));
            } else {
                self.trace.gates.broker_blocked += 1;
                blocked.push(id);
            }
        }
        let (kept, fw) = if self.gates.retrieval {
            self.screen_with(&admitted, receiver, query, true, usize::MAX)
        } else {
            // Without the retrieval gate the store still never returns a non-active item.
            let mut k = Vec::new();
            let mut b = Vec::new();
            for id in admitted.iter().map(|c| c.0) {
                if self.items.get(id).is_some_and(|it| it.mem.status == Status::Active) {
                    k.push(id);
                } else {
                    b.push(id);
                }
            }
            (k, b)
        };
        blocked.extend(fw);
        for id in stored {
            self.count_surfaced(id, blocked.contains(&id));
            let poisoned = self.items.get(id).is_some_and(|i| i.poisoned);
            if poisoned && let Some(s) = self.trace.poison_surfaced.get_mut(round - 1) {
                *s += 1;
            }
            if poisoned
                && kept.contains(&id)
                && let Some(a) = self.trace.poison_admitted.get_mut(round - 1)
            {
                *a += 1;
            }
        }
        self.count_admitted(&kept);
        kept
    }

    fn attacker_out(&self, task: &Task, i: usize, attacking: bool) -> Out {
        if !attacking {
            // Dormant (warm-up / probes): answers like a benign agent would.
            let (message, stance) = benign_message(task, task.correct, &Rationale::Own, false);
            return Out {
                answer: Some(task.correct),
                message,
                stance: Some(stance),
                poisoned: false,
                session: self.auth.as_ref().map(|_| Observed::clean()),
                carried: Restrictions::default(),
                rationale: Rationale::Own,
            };
        }
        let k = self.attackers.iter().position(|a| *a == i).unwrap_or(0);
        let (message, stance) = attacker_pitch(self.setting, task, task.plan.pitch + k);
        Out {
            answer: Some(task.target),
            message,
            stance: Some(stance),
            poisoned: true,
            // It reads nothing: a clean session (agent integrity, like any agent's output).
            session: self.auth.as_ref().map(|_| Observed::clean()),
            carried: Restrictions::default(),
            rationale: Rationale::Own,
        }
    }

    /// A benign agent's output for one round (in `full`, a consequential tool choice goes
    /// through the authority gate first).
    fn benign_out(&mut self, task: &Task, i: usize, round: usize, c: &AgentCtx, prev: Option<usize>, agent: &mut dyn LifecycleAgent) -> Out {
        // Context, in order: retrieved (best first), observations, hand-offs.
        struct Meta {
            poisoned: bool,
            item: Option<usize>,
            record: Option<ItemId>,
        }
        let mut metas: Vec<Meta> = Vec::new();
        let mut entries: Vec<ContextEntry<'_>> = Vec::new();
        let mut chars = task.query().len();
        for (&id, kind) in c.retrieved.iter().map(|id| (id, EntryKind::Memory)).chain(c.handoffs.iter().map(|id| (id, EntryKind::Handoff))) {
            let Some(it) = self.items.get(id) else {
                continue;
            };
            chars += it.mem.text.len();
            metas.push(Meta { poisoned: it.poisoned, item: Some(id), record: it.record });
            entries.push(ContextEntry { text: &it.mem.text, stance: it.stance.as_ref(), kind, flagged: it.mem.carried.unverified_note });
        }
        // Observations go between retrieved memories and hand-offs.
        let n_mem = c.retrieved.iter().filter(|id| self.items.get(**id).is_some()).count();
        for (k, o) in c.observations.iter().enumerate() {
            chars += o.text.len();
            metas.insert(n_mem + k, Meta { poisoned: o.injected, item: None, record: o.record });
            entries.insert(n_mem + k, ContextEntry { text: &o.text, stance: o.stance.as_ref(), kind: EntryKind::Observation, flagged: false });
        }
        let exposed = metas.iter().any(|m| m.poisoned && m.item.is_some());
        let seed = derive_seed(self.base_seed, ((task.index as u64) << 16) | ((i as u64) << 4) | round as u64 | u64::from(task.probe) << 40);
        let input = DecisionInput { setting: self.setting, task, round, context: &entries, previous: prev, draw_seed: seed };
        let mut d = agent.decide(&input);
        // `full`: a consequential tool choice is an action request decided by the authority gate
        // (Algorithm 1). `AskUser` goes to the user, who approves exactly the action they asked
        // for; anything else is declined, and the agent re-plans without the items the verdict
        // named as pushing the value. A second refusal leaves the agent without an answer.
        // `index` maps the decision's `followed` back to `metas`.
        let mut index: Vec<usize> = (0..metas.len()).collect();
        if self.auth.is_some() && self.sspec.tool {
            let records: Vec<ItemId> = metas.iter().filter_map(|m| m.record).collect();
            for attempt in 0..2 {
                let Some(a) = d.answer.filter(|a| task.consequential.get(*a).copied().unwrap_or(false)) else {
                    break;
                };
                let source = d.followed.and_then(|k| index.get(k)).and_then(|k| metas.get(*k)).and_then(|m| m.record);
                self.clock_ms += 1;
                let now = self.clock_ms;
                let (Some(auth), Some(action)) = (self.auth.as_ref(), task.options.get(a)) else {
                    break;
                };
                // Algorithm 1 on the proposal: the option's text is the action and its value; the
                // context's records and the followed entry's record as the declared source.
                let v = auth.decide(i, action, true, &records, &source.into_iter().collect::<Vec<_>>(), now);
                let approved = v.decision == Verdict::Allow || (v.decision == Verdict::AskUser && task.requested == Some(a));
                if approved {
                    if v.decision == Verdict::AskUser {
                        self.trace.gates.authority_user_approved += 1;
                    }
                    break;
                }
                self.trace.gates.authority_refused_actions += 1;
                if attempt == 1 {
                    d = super::agent::Decision { answer: None, rationale: Rationale::Own, followed: None, reason: None };
                    break;
                }
                index = (0..metas.len()).filter(|k| metas.get(*k).and_then(|m| m.record).is_none_or(|r| !v.pushers.contains(&r))).collect();
                let kept: Vec<ContextEntry<'_>> = index.iter().filter_map(|k| entries.get(*k).cloned()).collect();
                let retry = DecisionInput { context: &kept, draw_seed: derive_seed(seed, 0x1abe1), ..input.clone() };
                d = agent.decide(&retry);
            }
        }
        let followed = d.followed.and_then(|k| index.get(k).copied());
        let followed_poison = followed.and_then(|k| metas.get(k)).is_some_and(|m| m.poisoned);
        let mut carried = Restrictions::default();
        if self.gates.broker {
            for m in &metas {
                if let Some(it) = m.item.and_then(|id| self.items.get(id)) {
                    carried = carried.merge(&it.mem.carried);
                }
            }
            carried.readers = Readers::All;
            carried.task_classes = None;
        }
        let (message, stance) = match d.answer {
            None => ("I could not settle on an answer.".to_owned(), None),
            Some(a) => match &d.reason {
                Some(r) => {
                    let assertive = matches!(d.rationale, Rationale::Note(_));
                    let text = task.options.get(a).cloned().unwrap_or_default();
                    (
                        format!("My answer: {}. {r}", task.option_phrase(a)),
                        Some(Stance { pushed: Pushed::Text(text), about: Some(task.qid), assertive }),
                    )
                }
                None => {
                    let verified = self.draw(task, 1, i) < VERIFIED_PHRASE;
                    let (m, s) = benign_message(task, a, &d.rationale, verified);
                    (m, Some(s))
                }
            },
        };
        if let Some(id) = followed.and_then(|k| metas.get(k)).and_then(|m| m.item)
            && let Some(o) = self.origin_by_id(id)
        {
            o.followed += 1;
        }
        let correct = d.answer == Some(task.correct);
        self.trace.outputs.push(OutputRecord {
            task: task.index,
            round,
            agent: i,
            benign: true,
            correct,
            exposed,
            risky: self.sspec.tool && d.answer == Some(task.target),
            warmup: task.warmup,
            probe: task.probe,
            tokens: u32::try_from(chars / 4).unwrap_or(u32::MAX),
        });
        if let Some(s) = self.trace.poison_surfaced.get_mut(round - 1) {
            *s += c.pool_poison;
        }
        if let Some(s) = self.trace.poison_admitted.get_mut(round - 1) {
            *s += c.kept_poison;
        }
        Out { answer: d.answer, message, stance, poisoned: followed_poison, session: self.session(i), carried, rationale: d.rationale }
    }

    /// Feedback, stored observations, experiences and promotions after a task.
    fn after_task(&mut self, task: &Task, ctx: &[AgentCtx], outs: &[Option<Out>]) {
        for (i, o) in outs.iter().enumerate() {
            if self.is_attacker.get(i).copied().unwrap_or(false)
                && let Some(o) = o
            {
                    self.trace.outputs.push(OutputRecord {
                        task: task.index,
                        round: self.rounds,
                        agent: i,
                        benign: false,
                        correct: o.answer == Some(task.correct),
                        exposed: false,
                        risky: false,
                        warmup: task.warmup,
                        probe: false,
                        tokens: 0,
                    });
            }
        }
        let finals: Vec<Option<usize>> = outs.iter().map(|o| o.as_ref().and_then(|o| o.answer)).collect();
        // The system's answer: the plurality of every agent's final output (the deployment
        // cannot tell attackers apart).
        let mut votes = vec![0usize; task.options.len()];
        for a in finals.iter().flatten() {
            if let Some(v) = votes.get_mut(*a) {
                *v += 1;
            }
        }
        let top = votes.iter().copied().max().unwrap_or(0);
        let system = if top == 0 { None } else { votes.iter().position(|v| *v == top) };
        let accepted = |i: usize| finals.get(i).copied().flatten().is_some() && finals.get(i).copied().flatten() == system;
        let correct = |i: usize| finals.get(i).copied().flatten() == Some(task.correct);

        // 1. Outcome feedback to the items each benign agent used.
        if self.fb != FeedbackMode::Off {
            for &i in &self.benign.clone() {
                let outcome = if correct(i) { Outcome::Success } else { Outcome::Failure };
                let mut used = ctx.get(i).map(|c| c.used.clone()).unwrap_or_default();
                used.sort_unstable();
                used.dedup();
                for id in used {
                    let Some(it) = self.items.get(id) else {
                        continue;
                    };
                    let state = FeedbackState { guard: it.mem.guard.clone(), source_agent_trust: it.writer.and_then(|w| self.reputation.get(w).copied()) };
                    let rec = feedback(self.fcfg, &state, outcome);
                    let writer = it.writer;
                    if let Some(it) = self.items.get_mut(id) {
                        it.mem.guard = rec.after.guard;
                    }
                    if let (Some(w), Some(t)) = (writer, rec.after.source_agent_trust)
                        && let Some(r) = self.reputation.get_mut(w)
                    {
                        *r = t;
                    }
                }
            }
        }
        // 2. Observations the agents saw are stored as memories (through the write gate).
        for &i in &self.benign.clone() {
            let Some(c) = ctx.get(i) else {
                continue;
            };
            for o in &c.observations {
                let is_tool = o.tool;
                let (route, intent, mtype) = if is_tool {
                    (Route::ToolObservation, "Tool output from the lookup", "tool_observation")
                } else {
                    (Route::ExternalObservation, "Search result", "web_snippet")
                };
                let mut guard = initial_guard(self.fcfg, InitialCondition::FeedbackOff);
                guard.taint = Taint::External;
                let text = MemoryText { intent: intent.to_owned(), body: o.text.clone(), memory_type: mtype, tags: Vec::new(), stance: o.stance.clone() };
                // The record admitted when the agent was handed it (the tool or the web wrote it).
                let mut author = AuthorWrite::new(if is_tool { Writer::Tool } else { Writer::Web }).readers(vec![i]);
                author.existing = o.record;
                let mut item = self.item(i, None, text, route, guard, author, o.injected, Vec::new(), Restrictions::default());
                item.origin = if is_tool { "tool_output" } else { "snippet" };
                self.store(item);
            }
        }
        // 3. Post-task experiences.
        let mut experiences: Vec<(usize, usize)> = Vec::new();
        for &i in &self.benign.clone() {
            let (Some(Some(o)), Some(c)) = (outs.get(i), ctx.get(i)) else {
                continue;
            };
            let Some(answer) = o.answer else {
                continue;
            };
            let (outcome, cond) = match self.fb {
                FeedbackMode::Off => (ExperienceOutcome::Unverified, InitialCondition::FeedbackOff),
                _ if correct(i) => (ExperienceOutcome::Correct, InitialCondition::AfterSuccess),
                _ => (ExperienceOutcome::Incorrect, InitialCondition::AfterFailure),
            };
            let echo = match (&o.rationale, outcome) {
                (Rationale::Note(e), ExperienceOutcome::Correct | ExperienceOutcome::Unverified) => Some(e.as_str()),
                _ => None,
            };
            let tip = (self.draw(task, 2, i) < TIP_RATE).then(|| {
                let t = tips(self.setting);
                t.get((self.draw(task, 3, i) * t.len() as f64) as usize).copied().unwrap_or("")
            });
            let text = benign_experience(task, answer, outcome, echo, tip);
            let mut parents: Vec<String> = Vec::new();
            for id in c.used.iter() {
                if let Some(it) = self.items.get(*id) {
                    let p = memwarden_lifecycle::route_source_name(it.mem.route).to_owned();
                    if !parents.contains(&p) && parents.len() < 8 {
                        parents.push(p);
                    }
                }
            }
            let mut carried = Restrictions::default();
            if self.gates.broker {
                for id in &c.used {
                    if let Some(it) = self.items.get(*id) {
                        carried = carried.merge(&it.mem.carried);
                    }
                }
                carried.readers = Readers::All;
                carried.task_classes = None;
            }
            let poisoned = echo.is_some() && o.poisoned;
            let guard = initial_guard(self.fcfg, cond);
            // Written from the session the agent worked the task in.
            let mut author = AuthorWrite::new(Writer::Agent(i)).readers(vec![i]);
            author.observed = self.session(i);
            let mut item = self.item(i, Some(i), text, Route::PostTaskExperience, guard, author, poisoned, parents, carried);
            item.origin = if poisoned { "echo_experience" } else { "experience" };
            if let Some(id) = self.store(item) {
                experiences.push((i, id));
            }
        }
        let mut attacker_experiences: Vec<(usize, usize)> = Vec::new();
        if self.attack && !task.warmup {
            for &a in &self.attackers.clone() {
                let cond = if self.fb == FeedbackMode::Off { InitialCondition::FeedbackOff } else { InitialCondition::AfterFailure };
                let guard = initial_guard(self.fcfg, cond);
                let author = AuthorWrite::new(Writer::Agent(a)).readers(vec![a]);
                let mut item = self.item(a, Some(a), attacker_experience(task), Route::PostTaskExperience, guard, author, true, Vec::new(), Restrictions::default());
                item.origin = "attacker_experience";
                if let Some(id) = self.store(item) {
                    attacker_experiences.push((a, id));
                }
            }
        }
        // 4. Promotions. The benign runner's eligibility: experience promotion needs evaluated
        //    success (answer agreement without correctness feedback); retrieved-item promotion
        //    needs answer agreement. Attacker-controlled agents are not bound by the runner's
        //    policy: they ask to promote their own experience on every attack task, and only the
        //    memory layer stands in the way.
        let fb_off = self.fb == FeedbackMode::Off;
        let eligible = |i: usize| if fb_off { accepted(i) } else { correct(i) };
        if self.draw(task, 4, 0) < PROMOTION_RATE {
            let pool: Vec<(usize, usize)> = experiences.iter().copied().filter(|(i, _)| eligible(*i)).collect();
            if !pool.is_empty() {
                let k = (self.draw(task, 5, 0) * pool.len() as f64) as usize;
                if let Some(&(i, id)) = pool.get(k.min(pool.len() - 1)) {
                    self.promote(id, i);
                }
            }
        }
        if self.draw(task, 6, 0) < PROMOTION_RATE {
            let pool: Vec<usize> = self.benign.iter().copied().filter(|i| accepted(*i)).collect();
            if !pool.is_empty() {
                let k = (self.draw(task, 7, 0) * pool.len() as f64) as usize;
                if let Some(&i) = pool.get(k.min(pool.len() - 1))
                    && let (Some(c), Some(a)) = (ctx.get(i), finals.get(i).copied().flatten())
                {
                    let support = c.retrieved.iter().chain(c.handoffs.iter()).copied().find(|id| {
                        self.items.get(*id).is_some_and(|it| {
                            it.owner == i && !it.shared && it.mem.status == Status::Active && it.stance.as_ref().and_then(|s| s.resolve(task)) == Some(a)
                        })
                    });
                    if let Some(id) = support {
                        self.promote(id, i);
                    }
                }
            }
        }
        for (a, id) in attacker_experiences {
            self.promote(id, a);
        }
    }

    /// The item as it would sit in the shared store after a promotion (in place: the same item,
    /// widened to the team, with the `shared_promotion` lineage marker).
    fn promoted_view(mem: &LifecycleMemory) -> LifecycleMemory {
        let mut m = mem.clone();
        m.scope = LifecycleScope::Team;
        m.readers = Readers::All;
        if m.parents.len() < 32 && !m.parents.iter().any(|p| p == "shared_promotion") {
            m.parents.push("shared_promotion".to_owned());
        }
        m
    }

    /// A promotion request of item `id` by agent `by` (its owner) into the shared store: in
    /// `full` the authority gate first (owner, active, within the ancestry), then the lifecycle
    /// promotion gate (a block quarantines the item). A promoted item is widened in place.
    fn promote(&mut self, id: usize, by: usize) {
        let Some(it) = self.items.get(id) else {
            return;
        };
        let poisoned = it.poisoned;
        let record = it.record;
        if it.mem.status != Status::Active || it.shared {
            return;
        }
        if let Some(o) = self.origin_by_id(id) {
            o.promotions += 1;
        }
        {
            let g = &mut self.trace.gates;
            if poisoned {
                g.poison_promotions += 1;
            } else {
                g.benign_promotions += 1;
            }
        }
        if let (Some(auth), Some(rec)) = (self.auth.as_mut(), record)
            && auth.promote(by, rec).is_err()
        {
            self.trace.gates.authority_refused_promotions += 1;
            return;
        }
        if self.gates.promotion
            && let Some(it) = self.items.get(id)
        {
            let d = promotion_gate(self.scorer, &it.mem, PromotionTarget::Team);
            if d.outcome == PromotionOutcome::Block {
                if poisoned && self.gates.retrieval {
                    // Shadow check (diagnostics only): would the retrieval gate have kept the
                    // promoted copy out of another agent's prompt anyway?
                    let view = Self::promoted_view(&it.mem);
                    let reader = self.benign.iter().copied().find(|b| *b != by).unwrap_or(by);
                    let blocked = self.read_would_block(&view, reader);
                    let g = &mut self.trace.gates;
                    if blocked {
                        g.poison_promotion_blocked_read_would_block += 1;
                    } else {
                        g.poison_promotion_blocked_read_would_pass += 1;
                        if let Some(o) = self.origin_by_id(id) {
                            o.promotion_blocked_read_would_pass += 1;
                        }
                    }
                }
                if let Some(o) = self.origin_by_id(id) {
                    o.promotion_blocked += 1;
                }
                if let Some(it) = self.items.get_mut(id) {
                    d.apply(&mut it.mem);
                }
                return;
            }
        }
        if let Some(it) = self.items.get_mut(id) {
            it.mem = Self::promoted_view(&it.mem);
            it.shared = true;
        }
        if let Some(o) = self.origin_by_id(id) {
            o.promoted += 1;
        }
        let g = &mut self.trace.gates;
        if poisoned {
            g.poison_promoted += 1;
        } else {
            g.benign_promoted += 1;
        }
    }

    fn finish(&mut self) {
        self.trace.poison_persisting =
            self.items.iter().filter(|it| it.poisoned && it.committed && it.mem.status == Status::Active && it.mem.scope.is_open()).count() as u64;
    }
}
