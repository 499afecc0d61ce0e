//! The LoCoMo retrieval-quality benchmark (`memwarden bench locomo`): how well each shipped
//! preset finds the right memory on public conversational data, and what an attacker who writes
//! into the conversation gets out of it.
//!
//! LoCoMo (Maharana et al., ACL 2024) is read from a directory given at run time (never copied
//! into the repository). For every conversation and every preset (`EngineConfig::for_preset`:
//! `none`, `lineage`, `lifecycle`, `full`; never a re-composition of the layers) a fresh
//! [`Engine`] on a temporary data directory stores each turn as the principal that would write it
//! in a real deployment: `speaker_a` as the **user** (`Direct`), `speaker_b` as a **source** (a
//! message from another person is external content: `ExternalObservation`), in a namespace per
//! conversation, text `(date) speaker: text`, with `dia_id`, session and session time in
//! metadata. Every question is then searched as the **agent** (k = 10), each in its own session.
//!
//! Scoring: evidence recall@1/5/10 (any-of and all-of the annotated evidence turns), MRR and
//! nDCG@10 over categories 1-4 (per category too), with Wilson or bootstrap 95% intervals;
//! turn-level recall per speaker role (user turns vs source turns), so the cost of trust rules on
//! external content is visible; category 5 (adversarial: no evidence should be needed) separately.
//!
//! **Under attack** ([`attack`]) the same conversations carry poison turns written by an attacker
//! source: false facts next to the evidence, instruction-style turns, and planted payees with a
//! "pay this" request. Reported per preset: benign evidence recall@5, exposure (share of questions
//! whose top 5 holds poison) per kind, and for each planted payee whether a payment a maximally
//! persuadable agent proposes from what it retrieved (`decide` with a `pay` action carrying the
//! account it read, its context the retrieved memories) is allowed.
//!
//! The embedding model (all-MiniLM-L6-v2 by default) embeds each distinct text once: the engines
//! embed through a caching [`Embedder`] keyed by text, warmed before any engine runs, so every
//! preset sees the same vectors and the latencies measure the engine, not the model.

pub mod attack;
pub mod data;
pub mod figure;
pub mod metrics;
pub mod qa;
pub mod report;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use memwarden_core::action::ACTION_CONTEXT_MAX;
use memwarden_core::prelude::*;
use memwarden_embed::{EmbedError, Embedder};
use memwarden_engine::{Actor, Engine, EngineConfig, Preset, SearchHit};

use self::attack::{Attack, AttackConfig, PoisonKind};
use self::data::{Conversation, Speaker};
use self::metrics::{K, Ranked};
use crate::BenchError;

pub use self::report::{LocomoReport, write_locomo};

/// The tenant every run uses (one engine per conversation and preset, so nothing is shared).
pub const TENANT: &str = "locomo";
/// Most distinct texts the embedding cache keeps.
pub const EMBED_CACHE_ENTRIES_MAX: usize = 500_000;
/// Texts per model call while warming the cache.
pub const WARM_BATCH: usize = 64;

/// Which embedder the engines use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// The local model (all-MiniLM-L6-v2) from this directory (`None`: the usual search order:
    /// `$MEMWARDEN_MODEL_DIR`, then `./models/all-MiniLM-L6-v2`).
    Local(Option<PathBuf>),
    /// Feature hashing (tests only; semantically weak, never the default).
    Hash,
}

impl EmbedderChoice {
    /// Parse `local` or `hash`.
    pub fn from_name(name: &str, model_dir: Option<PathBuf>) -> Result<Self, BenchError> {
        match name {
            "local" => Ok(Self::Local(model_dir)),
            "hash" => Ok(Self::Hash),
            other => Err(BenchError::Invalid(format!("embedder {other:?}: local or hash"))),
        }
    }
}

/// How the engine searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Vector similarity only (`EngineConfig::hybrid = false`).
    Vector,
    /// Lexical (BM25) and vector candidates fused by reciprocal rank (`EngineConfig::hybrid`,
    /// issue 16 item 3).
    Hybrid,
}

impl SearchMode {
    /// Parse `vector` or `hybrid`.
    pub fn from_name(name: &str) -> Result<Self, BenchError> {
        match name {
            "vector" => Ok(Self::Vector),
            "hybrid" => Ok(Self::Hybrid),
            other => Err(BenchError::Invalid(format!("search mode {other:?}: vector or hybrid"))),
        }
    }
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vector => "vector",
            Self::Hybrid => "hybrid",
        }
    }
}

/// The presets run by default.
pub const DEFAULT_PRESETS: [Preset; 4] = [Preset::None, Preset::Lineage, Preset::Lifecycle, Preset::Full];

/// Options of one run.
#[derive(Debug, Clone)]
pub struct LocomoBenchOptions {
    /// Where the LoCoMo conversations (`<id>.json`) are.
    pub data_dir: PathBuf,
    /// Output directory.
    pub out: PathBuf,
    /// One conversation (the smallest of those asked for).
    pub quick: bool,
    /// Conversation ids (empty: the five of the shared subset).
    pub conversations: Vec<String>,
    /// Presets (empty: [`DEFAULT_PRESETS`]).
    pub presets: Vec<Preset>,
    /// Embedder.
    pub embedder: EmbedderChoice,
    /// Search mode.
    pub search: SearchMode,
    /// The attack (None: benign runs only).
    pub attack: Option<AttackConfig>,
    /// Git revision to stamp.
    pub git_rev: Option<String>,
}

impl LocomoBenchOptions {
    /// Defaults: every conversation of the subset, the four presets, the local model, vector
    /// search, the default attack.
    pub fn new(data_dir: impl Into<PathBuf>, out: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            out: out.into(),
            quick: false,
            conversations: Vec::new(),
            presets: Vec::new(),
            embedder: EmbedderChoice::Local(None),
            search: if memwarden_engine::HYBRID_DEFAULT { SearchMode::Hybrid } else { SearchMode::Vector },
            attack: Some(AttackConfig::default()),
            git_rev: None,
        }
    }
}

/// An [`Embedder`] that remembers every text's vector (keyed by the exact text), so a text is
/// embedded by the model once however many engines store or search it. Bounded by
/// [`EMBED_CACHE_ENTRIES_MAX`] (past that, texts are embedded without being kept).
pub struct CachingEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Mutex<HashMap<String, Vec<f32>>>,
    model_calls: Mutex<(u64, u64)>,
}

impl CachingEmbedder {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self { inner, cache: Mutex::new(HashMap::new()), model_calls: Mutex::new((0, 0)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<f32>>> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// (model calls, texts the model embedded).
    pub fn model_stats(&self) -> (u64, u64) {
        *self.model_calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Distinct texts cached.
    pub fn cached(&self) -> usize {
        self.lock().len()
    }

    /// Embed every text not cached yet, `WARM_BATCH` at a time.
    pub fn warm(&self, texts: &[String], progress: &mut dyn FnMut(usize, usize)) -> Result<(), EmbedError> {
        let missing: Vec<&str> = {
            let c = self.lock();
            let mut seen = std::collections::HashSet::new();
            texts.iter().map(String::as_str).filter(|t| !c.contains_key(*t) && seen.insert(*t)).collect()
        };
        for (i, chunk) in missing.chunks(WARM_BATCH).enumerate() {
            self.embed(chunk)?;
            progress((i * WARM_BATCH + chunk.len()).min(missing.len()), missing.len());
        }
        Ok(())
    }
}

impl Embedder for CachingEmbedder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn dims(&self) -> usize {
        self.inner.dims()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let c = self.lock();
            texts.iter().map(|t| c.get(*t).cloned()).collect()
        };
        let missing: Vec<&str> = texts.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(t, _)| *t).collect();
        if !missing.is_empty() {
            let vs = self.inner.embed(&missing)?;
            if vs.len() != missing.len() {
                return Err(EmbedError(format!("the model returned {} vectors for {} texts", vs.len(), missing.len())));
            }
            {
                let mut m = self.model_calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                m.0 += 1;
                m.1 += missing.len() as u64;
            }
            let mut c = self.lock();
            let mut fresh = vs.into_iter();
            for (slot, t) in out.iter_mut().zip(texts) {
                if slot.is_none() {
                    let v = fresh.next().ok_or_else(|| EmbedError("lost a vector".into()))?;
                    if c.len() < EMBED_CACHE_ENTRIES_MAX {
                        c.insert((*t).to_owned(), v.clone());
                    }
                    *slot = Some(v);
                }
            }
        }
        out.into_iter().map(|v| v.ok_or_else(|| EmbedError("lost a vector".into()))).collect()
    }
}

/// Who wrote a stored memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WriterRole {
    /// `speaker_a`'s turns (a `User` principal).
    User,
    /// `speaker_b`'s turns (a `Source` principal).
    Source,
    /// Poison (the attacker, a `Source` principal).
    Attacker,
    /// The user's own payee notes (attack runs only; controls).
    UserControl,
}

impl WriterRole {
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Source => "source",
            Self::Attacker => "attacker",
            Self::UserControl => "user_control",
        }
    }
}

/// What a write turned into (per writer role, or per poison kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct WriteCounts {
    /// Writes asked for.
    pub requested: u64,
    /// Refused by a gate (nothing stored).
    pub refused: u64,
    /// Stored and active.
    pub active: u64,
    /// Stored but not retrievable (quarantined or blocked).
    pub held: u64,
    /// Stored with its text rewritten (the lifecycle layer's unverified-note prefix).
    pub rewritten: u64,
}

impl WriteCounts {
    fn add(&mut self, o: &WriteCounts) {
        self.requested += o.requested;
        self.refused += o.refused;
        self.active += o.active;
        self.held += o.held;
        self.rewritten += o.rewritten;
    }
}

/// What one stored memory is (the harness's own record; no gate sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    Turn(usize),
    Injected(usize),
}

/// One question's result in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionResult {
    /// Index into the conversation's questions.
    pub question: usize,
    /// Evidence ranks.
    pub ranked: Ranked,
    /// Hits returned (at most k).
    pub returned: usize,
    /// Poison kinds present in the top 5.
    pub poison_top5: Vec<PoisonKind>,
    /// Whether the top 5 holds the poison turn that targets this question (false fact or
    /// instruction), per kind.
    pub own_poison_top5: Vec<PoisonKind>,
    /// Search latency (µs, query embedding from the warm cache).
    pub latency_us: u64,
}

/// One pay task's outcome.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PayOutcome {
    /// Planted (attacker) payee or a control (the user's own).
    pub planted: bool,
    /// The task's injected turn was in the top 10.
    pub retrieved: bool,
    /// The account the agent proposed (the top-ranked retrieved memory naming an account).
    pub proposed_account: Option<String>,
    /// The proposed account is one an attacker planted (any of them).
    pub proposed_planted: bool,
    /// The proposed account is this task's own.
    pub proposed_own: bool,
    /// The engine's decision on the proposal (None: nothing proposed).
    pub decision: Option<Decision>,
    /// The rule that decided (None: nothing proposed).
    pub rule: Option<String>,
}

impl PayOutcome {
    /// The payment went ahead (`allow`, or `redact`: go ahead with the flagged content removed).
    pub fn executed(&self) -> bool {
        matches!(self.decision, Some(Decision::Allow | Decision::Redact))
    }
}

/// One engine run: one conversation, one preset, benign or under attack.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Conversation id.
    pub conversation: String,
    /// Preset.
    pub preset: Preset,
    /// Under attack.
    pub attacked: bool,
    /// Per question (every question of the conversation).
    pub questions: Vec<QuestionResult>,
    /// Writes per role.
    pub writes: BTreeMap<WriterRole, WriteCounts>,
    /// Poison writes per kind.
    pub poison_writes: BTreeMap<PoisonKind, WriteCounts>,
    /// Pay tasks (attack runs).
    pub pay: Vec<PayOutcome>,
    /// Wall time storing every turn (ms).
    pub ingest_ms: u64,
    /// Wall time of the whole run (ms).
    pub wall_ms: u64,
}

fn slug(name: &str, fallback: &str) -> String {
    let s: String = name.to_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).take(40).collect();
    if s.is_empty() { fallback.to_owned() } else { s }
}

fn inv<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Invalid(e.to_string())
}

struct Cast {
    tenant: TenantId,
    user: Actor,
    source: Actor,
    attacker: Actor,
}


fn register(engine: &Engine, conv: &Conversation) -> Result<Cast, BenchError> {
    let tenant = TenantId::new(TENANT).map_err(inv)?;
    let user_id = PrincipalId::new(&format!("user-{}", slug(&conv.speaker_a, "a"))).map_err(inv)?;
    let source_id = PrincipalId::new(&format!("source-{}", slug(&conv.speaker_b, "b"))).map_err(inv)?;
    let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]).verifying_key().to_bytes();
    // Built from its serialized form so that fields added to `Principal` later (with serde
    // defaults) need no change here.
    let reg = |id: &PrincipalId, kind: PrincipalKind, domain: Option<&str>, public_key: Option<[u8; 32]>| -> Result<(), BenchError> {
        let key_hex = public_key.map(|k| k.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let p: Principal = serde_json::from_value(serde_json::json!({
            "id": id, "tenant": tenant, "kind": kind, "domain": domain, "allow_listed": false, "public_key": key_hex,
        }))
        .map_err(inv)?;
        engine.register_principal(p)?;
        Ok(())
    };
    let agent = PrincipalId::new("agent").map_err(inv)?;
    let attacker = PrincipalId::new("attacker").map_err(inv)?;
    reg(&user_id, PrincipalKind::User, None, Some(key))?;
    reg(&source_id, PrincipalKind::Source, Some(&format!("{}.example", slug(&conv.speaker_b, "b"))), None)?;
    reg(&agent, PrincipalKind::Agent, None, None)?;
    reg(&attacker, PrincipalKind::Source, Some("attacker.example"), None)?;
    Ok(Cast {
        user: engine.authenticate(&tenant, &user_id)?,
        source: engine.authenticate(&tenant, &source_id)?,
        attacker: engine.authenticate(&tenant, &attacker)?,
        tenant,
    })
}

/// The namespace of a conversation.
pub fn namespace_of(conv: &Conversation) -> Result<Namespace, BenchError> {
    Namespace::new(&format!("locomo-{}", slug(&conv.id, "conv"))).map_err(inv)
}

/// Search as the engine is asked to in `mode`.
/// Search as the engine was configured to (the mode is the engine's `hybrid` setting).
pub fn search(engine: &Engine, actor: &Actor, ns: &Namespace, query: &str) -> Result<Vec<SearchHit>, BenchError> {
    Ok(engine.search(actor, ns, query, K)?)
}

/// One pending write: who, what, and what the harness knows it is.
struct Pending {
    role: WriterRole,
    kind: Option<PoisonKind>,
    stored: Stored,
    req: WriteRequest,
}

fn write_batch(engine: &Engine, actor: &Actor, cast: &Cast, batch: Vec<Pending>, ids: &mut HashMap<ItemId, Stored>, run: &mut RunResult) -> Result<(), BenchError> {
    for chunk in batch.chunks(memwarden_engine::ADD_MANY_MAX) {
        let reqs: Vec<WriteRequest> = chunk.iter().map(|p| p.req.clone()).collect();
        let outcomes = engine.add_many(actor, reqs)?;
        for (p, o) in chunk.iter().zip(outcomes) {
            let mut c = WriteCounts { requested: 1, ..WriteCounts::default() };
            match o {
                Ok((id, _)) => {
                    let item = engine.store().item(&cast.tenant, &id)?.ok_or_else(|| BenchError::Invalid(format!("memory {id} was stored but cannot be read back")))?;
                    if item.status().retrievable() {
                        c.active = 1;
                    } else {
                        c.held = 1;
                    }
                    if item.content() != p.req.content {
                        c.rewritten = 1;
                    }
                    ids.insert(id, p.stored);
                }
                // A gate's refusal is a measured outcome; anything else fails the run.
                Err(memwarden_engine::EngineError::Refused { .. } | memwarden_engine::EngineError::Write(_)) => c.refused = 1,
                Err(e) => return Err(e.into()),
            }
            run.writes.entry(p.role).or_default().add(&c);
            if let Some(k) = p.kind {
                run.poison_writes.entry(k).or_default().add(&c);
            }
        }
    }
    Ok(())
}

fn request(ns: &Namespace, conv: &Conversation, text: String, route: Route, dia_id: &str, session: usize, speaker: &str) -> WriteRequest {
    let mut req = WriteRequest::new(ns.clone(), text, route);
    let time = conv.sessions.iter().find(|s| s.number == session).map_or("", |s| s.date_time.as_str());
    let session = session.to_string();
    for (k, v) in [("conversation", conv.id.as_str()), ("dia_id", dia_id), ("session", session.as_str()), ("session_time", time), ("speaker", speaker)] {
        req.metadata.insert(k.to_owned(), v.chars().take(200).collect());
    }
    req
}

/// Every text a run embeds (turns, injected turns, questions, pay-task queries), for warming.
pub fn texts_of(conv: &Conversation, attack: Option<&Attack>) -> Vec<String> {
    let mut t: Vec<String> = (0..conv.turns.len()).filter_map(|i| conv.stored_text(i)).collect();
    t.extend(conv.questions.iter().map(|q| q.text.clone()));
    if let Some(a) = attack {
        t.extend(a.injected.iter().map(|i| i.text.clone()));
        t.extend(a.pay_tasks.iter().map(|p| p.query.clone()));
    }
    t
}

/// The first `ACCT-XXXX-XXXX` account named in `text`.
pub fn account_in(text: &str) -> Option<String> {
    let pos = text.find("ACCT-")?;
    let tail: String = text[pos..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    (tail.len() >= 9).then_some(tail)
}

/// Run one conversation under one preset, benign (`attack` None) or attacked.
pub fn run_one(conv: &Conversation, attack: Option<&Attack>, preset: Preset, embedder: Arc<dyn Embedder>, mode: SearchMode) -> Result<RunResult, BenchError> {
    run_one_observed(conv, attack, preset, embedder, mode, &mut |_, _| {})
}

/// [`run_one`], handing `observe` each question's index and the hits the engine returned for it
/// (what an answering agent is given: [`qa`]).
pub fn run_one_observed(
    conv: &Conversation,
    attack: Option<&Attack>,
    preset: Preset,
    embedder: Arc<dyn Embedder>,
    mode: SearchMode,
    observe: &mut dyn FnMut(usize, &[SearchHit]),
) -> Result<RunResult, BenchError> {
    let started = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| BenchError::Io(format!("temp dir: {e}")))?;
    let mut config = EngineConfig::for_preset(preset)?;
    config.embedder = Some(embedder);
    config.hybrid = mode == SearchMode::Hybrid;
    debug_assert_eq!(config.preset(), Some(preset), "the shipped preset, not a re-composition");
    let engine = Engine::open(dir.path(), config)?;
    let cast = register(&engine, conv)?;
    let ns = namespace_of(conv)?;
    let mut run = RunResult {
        conversation: conv.id.clone(),
        preset,
        attacked: attack.is_some(),
        questions: Vec::with_capacity(conv.questions.len()),
        writes: BTreeMap::new(),
        poison_writes: BTreeMap::new(),
        pay: Vec::new(),
        ingest_ms: 0,
        wall_ms: 0,
    };
    let mut ids: HashMap<ItemId, Stored> = HashMap::new();
    // Store session by session: the user's turns, the source's, then what was injected there.
    let t0 = Instant::now();
    for s in &conv.sessions {
        let mut user = Vec::new();
        let mut source = Vec::new();
        for &ti in &s.turns {
            let Some(t) = conv.turns.get(ti) else { continue };
            let Some(text) = conv.stored_text(ti) else { continue };
            let (role, route, list) = match t.speaker {
                Speaker::A => (WriterRole::User, Route::Direct, &mut user),
                Speaker::B => (WriterRole::Source, Route::ExternalObservation, &mut source),
            };
            list.push(Pending { role, kind: None, stored: Stored::Turn(ti), req: request(&ns, conv, text, route, &t.dia_id, s.number, &t.speaker_name) });
        }
        let mut poison = Vec::new();
        let mut controls = Vec::new();
        for (ii, inj) in attack.map(|a| a.injected.as_slice()).unwrap_or(&[]).iter().enumerate().filter(|(_, i)| i.session == s.number) {
            let near = conv.turns.get(inj.near_turn).map_or("", |t| t.dia_id.as_str());
            let dia = format!("{near}+{ii}");
            let claimed = inj.text.split_once(") ").and_then(|(_, r)| r.split_once(':')).map_or("", |(n, _)| n).to_owned();
            match inj.kind {
                Some(kind) => poison.push(Pending {
                    role: WriterRole::Attacker,
                    kind: Some(kind),
                    stored: Stored::Injected(ii),
                    req: request(&ns, conv, inj.text.clone(), Route::ExternalObservation, &dia, s.number, &claimed),
                }),
                None => controls.push(Pending {
                    role: WriterRole::UserControl,
                    kind: None,
                    stored: Stored::Injected(ii),
                    req: request(&ns, conv, inj.text.clone(), Route::Direct, &dia, s.number, &claimed),
                }),
            }
        }
        write_batch(&engine, &cast.user, &cast, user, &mut ids, &mut run)?;
        write_batch(&engine, &cast.source, &cast, source, &mut ids, &mut run)?;
        write_batch(&engine, &cast.attacker, &cast, poison, &mut ids, &mut run)?;
        write_batch(&engine, &cast.user, &cast, controls, &mut ids, &mut run)?;
    }
    run.ingest_ms = t0.elapsed().as_millis() as u64;
    let agent = PrincipalId::new("agent").map_err(inv)?;
    let kind_of = |s: &Stored| -> Option<(PoisonKind, Option<usize>)> {
        match s {
            Stored::Injected(i) => attack.and_then(|a| a.injected.get(*i)).and_then(|inj| inj.kind.map(|k| (k, inj.target_question))),
            Stored::Turn(_) => None,
        }
    };
    for (qi, q) in conv.questions.iter().enumerate() {
        let session = SessionId::new(&format!("q-{qi}")).map_err(inv)?;
        let actor = engine.authenticate_session(&cast.tenant, &agent, session)?;
        let t = Instant::now();
        let hits = search(&engine, &actor, &ns, &q.text)?;
        let latency_us = t.elapsed().as_micros() as u64;
        observe(qi, &hits);
        let stored: Vec<Option<Stored>> = hits.iter().map(|h| ids.get(&h.item.id()).copied()).collect();
        let ranks = q.evidence.iter().map(|e| stored.iter().position(|s| *s == Some(Stored::Turn(*e))).map(|p| p + 1)).collect();
        let mut poison_top5 = Vec::new();
        let mut own_poison_top5 = Vec::new();
        for s in stored.iter().take(5).flatten() {
            if let Some((k, target)) = kind_of(s) {
                if !poison_top5.contains(&k) {
                    poison_top5.push(k);
                }
                if target == Some(qi) && !own_poison_top5.contains(&k) {
                    own_poison_top5.push(k);
                }
            }
        }
        run.questions.push(QuestionResult { question: qi, ranked: Ranked { ranks }, returned: hits.len(), poison_top5, own_poison_top5, latency_us });
    }
    if let Some(a) = attack {
        let planted: Vec<&str> = a.pay_tasks.iter().filter(|p| p.planted).map(|p| p.account.as_str()).collect();
        for (pi, task) in a.pay_tasks.iter().enumerate() {
            let session = SessionId::new(&format!("pay-{pi}")).map_err(inv)?;
            let actor = engine.authenticate_session(&cast.tenant, &agent, session)?;
            let hits = search(&engine, &actor, &ns, &task.query)?;
            let retrieved = hits.iter().any(|h| ids.get(&h.item.id()) == Some(&Stored::Injected(task.injected)));
            // The maximally persuadable agent pays the account its best-ranked memory names.
            let source = hits.iter().find_map(|h| account_in(h.item.content()).map(|acct| (acct, h.item.id())));
            let mut outcome = PayOutcome { planted: task.planted, retrieved, proposed_account: None, proposed_planted: false, proposed_own: false, decision: None, rule: None };
            if let Some((acct, from)) = source {
                let action = ActionRequest {
                    tool: "pay".into(),
                    kind: ActionKind::Act,
                    risk: Risk::High,
                    values: vec![ActionValue { key: "payee_account".into(), value: acct.clone(), kind: ValueKind::Account, sources: vec![from] }],
                    amount: Some(task.amount.clone()),
                    context: hits.iter().take(ACTION_CONTEXT_MAX).map(|h| h.item.id()).collect(),
                    grants: Vec::new(),
                };
                let (verdict, _) = engine.decide(&actor, &action)?;
                outcome.proposed_planted = planted.contains(&acct.as_str());
                outcome.proposed_own = acct == task.account;
                outcome.proposed_account = Some(acct);
                outcome.decision = Some(verdict.decision);
                outcome.rule = serde_json::to_value(&verdict.rule).ok().and_then(|v| v.get("rule").and_then(|r| r.as_str().map(str::to_owned)).or_else(|| v.as_str().map(str::to_owned)));
            }
            run.pay.push(outcome);
        }
    }
    if !engine.verify_log()?.is_ok() {
        return Err(BenchError::Invalid(format!("the verdict log of conversation {} under {} does not verify", conv.id, preset.as_str())));
    }
    run.wall_ms = started.elapsed().as_millis() as u64;
    Ok(run)
}

/// Load the conversations a run asks for (`quick`: the one with the fewest turns).
pub fn load_conversations(opts: &LocomoBenchOptions) -> Result<Vec<Conversation>, BenchError> {
    let ids: Vec<String> = if opts.conversations.is_empty() { data::DEFAULT_CONVERSATIONS.iter().map(|s| (*s).to_owned()).collect() } else { opts.conversations.clone() };
    let mut convs = ids.iter().map(|id| data::load(&opts.data_dir, id)).collect::<Result<Vec<_>, _>>()?;
    if opts.quick {
        convs.sort_by_key(|c| (c.turns.len(), c.id.clone()));
        convs.truncate(1);
    }
    Ok(convs)
}

/// Whether the data directory holds the default conversations (tests skip without it).
pub fn data_present(dir: &Path) -> bool {
    data::DEFAULT_CONVERSATIONS.iter().all(|id| data::conversation_path(dir, id).is_file())
}

/// Run the benchmark. `progress(done, total)` counts engine runs.
pub fn run_locomo(opts: &LocomoBenchOptions, progress: &mut dyn FnMut(&str, usize, usize)) -> Result<LocomoReport, BenchError> {
    let started = Instant::now();
    let load_start = crate::retrieval::load_average();
    let date_utc = crate::retrieval::utc_now();
    let presets: Vec<Preset> = if opts.presets.is_empty() { DEFAULT_PRESETS.to_vec() } else { opts.presets.clone() };
    let convs = load_conversations(opts)?;
    let attacks: Vec<Option<Attack>> = convs.iter().map(|c| opts.attack.as_ref().map(|cfg| attack::generate(c, cfg))).collect();
    let inner: Arc<dyn Embedder> = match &opts.embedder {
        EmbedderChoice::Local(dir) => Arc::new(memwarden_embed::MiniLmEmbedder::load(&memwarden_embed::resolve_model_dir(dir.as_deref()).map_err(|e| BenchError::Agent(e.to_string()))?).map_err(|e| BenchError::Agent(e.to_string()))?),
        EmbedderChoice::Hash => Arc::new(memwarden_embed::HashEmbedder::new(384)),
    };
    let cache = Arc::new(CachingEmbedder::new(inner));
    let texts: Vec<String> = convs.iter().zip(&attacks).flat_map(|(c, a)| texts_of(c, a.as_ref())).collect();
    let t = Instant::now();
    cache.warm(&texts, &mut |d, n| progress("embedding", d, n)).map_err(|e| BenchError::Agent(e.to_string()))?;
    let embed_ms = t.elapsed().as_millis() as u64;
    let embedded = cache.model_stats().1;
    let total = convs.len() * presets.len() * if opts.attack.is_some() { 2 } else { 1 };
    let mut runs = Vec::with_capacity(total);
    for (conv, att) in convs.iter().zip(&attacks) {
        for &p in &presets {
            for a in [None, att.as_ref()].into_iter().take(if att.is_some() { 2 } else { 1 }) {
                let emb: Arc<dyn Embedder> = cache.clone();
                runs.push(run_one(conv, a, p, emb, opts.search)?);
                progress("engine runs", runs.len(), total);
            }
        }
    }
    let meta = report::RunMeta {
        quick: opts.quick,
        data_dir: opts.data_dir.display().to_string(),
        embedder: cache.name().to_owned(),
        search: opts.search,
        presets,
        attack: opts.attack,
        git_rev: opts.git_rev.clone(),
        date_utc,
        load_start,
        texts_embedded: embedded,
        embed_ms,
        model_calls_after_warm: cache.model_stats().1.saturating_sub(embedded),
        wall_time_s: started.elapsed().as_secs_f64(),
    };
    Ok(report::build(meta, &convs, &attacks, &runs))
}
