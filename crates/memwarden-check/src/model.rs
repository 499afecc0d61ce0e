//! The stateright model: abstract slot records plus each item's serialized JSON, ghost provenance,
//! and transitions that call the real gate code.

use crate::world::{ACT_AMOUNT, EPOCH_MS, KEY, SESSION_MS, TOOL, Val, Who, World, now_ms, slot_id, slot_of};
use crate::{AllowCounts, CheckConfig, GateKind};
use memwarden_core::normalize::fold;
use memwarden_core::prelude::*;
use stateright::{Model, Property};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Serialized JSON in the state. The text is shared between states (the memo tables hand out
/// the same allocation for the same text) and its hash is computed once, so hashing a state does
/// not rehash every item's text; equality still compares the text.
#[derive(Clone)]
pub struct Json {
    hash: u64,
    text: Arc<str>,
}

impl Json {
    fn new(text: String) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        text.hash(&mut h);
        Self { hash: h.finish(), text: Arc::from(text) }
    }
}

impl std::ops::Deref for Json {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::hash::Hash for Json {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.hash == other.hash && self.text == other.text)
    }
}

impl Eq for Json {}

impl PartialOrd for Json {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Json {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

/// Plain writes the model offers: the untrusted source writes either value (the attacker's, or
/// an email that happens to carry the legitimate account), the user writes the legitimate one.
/// The other origins write through their own paths: the agent by paraphrasing (origin `agent`),
/// an allow-listed tool by echoing (origin `trusted_tool`), so every (origin, label) pair the gate
/// can produce occurs: user/trusted, agent/agent, agent/untrusted, trusted_tool/trusted,
/// trusted_tool/untrusted and untrusted_external/untrusted.
pub(crate) const WRITES: [(Who, Val); 3] = [(Who::Inbox, Val::Attack), (Who::Inbox, Val::Legit), (Who::User, Val::Legit)];
/// Allow-listed tools the agent can have echo a stored value.
pub(crate) const ECHO_TOOLS: [Who; 1] = [Who::RegA];
/// Tool outputs reported by a caller other than the tool (with [`CheckConfig::tool_outputs`]):
/// one caller of each kind besides the agent — the user, another allow-listed tool, the
/// untrusted inbox — each reporting a value it could push. The agent reports bare echoes of
/// slots it was handed ([`Step::BareEcho`]).
/// The inbox reports either value, as it writes either (the model's `v_attack` is spelled with
/// look-alikes, which the gate always asks about, so a forged trusted report of `v_legit` is what
/// an attack on the tool-output door can get allowed).
pub(crate) const REPORTS: [(Who, Val); 4] = [(Who::User, Val::Legit), (Who::RegB, Val::Legit), (Who::Inbox, Val::Attack), (Who::Inbox, Val::Legit)];
/// The tool whose output is reported, and which also writes its own.
pub(crate) const REPORTED_TOOL: Who = Who::RegA;
/// Attestations the model offers (each principal attests at most once). All are for the
/// legitimate value, so an attacker-value action can count them only by ignoring the value; the
/// mirror shares registry A's domain; the sock puppet is untrusted.
pub(crate) const ATTESTS: [(Who, Val); 4] =
    [(Who::RegA, Val::Legit), (Who::RegAMirror, Val::Legit), (Who::RegB, Val::Legit), (Who::Sock, Val::Legit)];
/// Most grants issued in one run (it can be presented any number of times, in any session).
pub(crate) const GRANTS_MAX: usize = 1;
/// Grants the user can issue, as (tool, value, amount): exactly the attack action, the same value
/// and tool with another amount, and the same value and amount for another tool. Presenting one
/// with another value exercises the value binding. (A grant forged by the attacker is not issued:
/// the agent can present one with any single-item action.)
pub(crate) const GRANTS: [(&str, Val, u32); 3] = [(TOOL, Val::Attack, 1500), (TOOL, Val::Attack, 9000), ("wire", Val::Attack, 1500)];
/// The nonce byte of the attacker's forged grant (it names the user but is signed with another key).
const FORGED: u8 = 0xEF;

/// The store the model's own decisions run on (the engine under check names its own).
const MODEL_STORE: &str = "model-store";

/// How a slot's item was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotOp {
    /// A plain write by this principal.
    Write(Who),
    /// The agent's paraphrase (summary) of another slot.
    Paraphrase(u8),
    /// An allow-listed tool's echo of another slot's value.
    Echo(Who, u8),
    /// [`REPORTED_TOOL`]'s output as reported by this caller (not the tool), with or without an
    /// argument carrying the value; the caller's session is fresh.
    Report(Who, bool),
    /// The agent, handed this slot, reports [`REPORTED_TOOL`]'s output carrying its value with
    /// no argument and no input (the bare echo of issue 14 item 1).
    BareEcho(u8),
    /// The tool writes its own output (authenticated as the tool).
    OwnOutput(Who),
}

/// One memory slot: the abstract record and the real item as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Slot {
    /// How it was made.
    pub op: SlotOp,
    /// The value it carries.
    pub value: Val,
    /// Ghost truth: its provenance includes an untrusted-origin write.
    pub ghost_untrusted: bool,
    /// The label the real gate gave it.
    pub label: Integrity,
    /// `serde_json::to_string` of the admitted `MemoryItem`.
    pub json: Json,
}

/// A grant the user issued in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrantRec {
    /// The tool it binds.
    pub tool: &'static str,
    /// The value it binds.
    pub value: Val,
    /// The amount it binds.
    pub amount: u32,
    /// The session it was issued in (it expires at that session's end).
    pub session: u8,
}

/// The model state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ModelState {
    /// Memory slots, filled in order.
    pub slots: Vec<Slot>,
    /// Current session.
    pub session: u8,
    /// Attestations: (attester, value, JSON of the admitted attestation), sorted.
    pub attested: Vec<(Who, Val, Json)>,
    /// Grants issued so far; a grant's index is its nonce.
    pub grants: Vec<GrantRec>,
    /// Indices of consumed grants, sorted.
    pub used: Vec<u8>,
    /// JSON of the elevations the gate recorded.
    pub elevations: Vec<Json>,
    /// Sticky: an allowed action violated Sec.
    pub sec_violated: bool,
    /// Sticky: a transformation raised a label.
    pub nm_violated: bool,
}

/// An action's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ctx {
    /// One slot.
    Slot(u8),
    /// Every slot.
    All,
}

/// A grant an action presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Presented {
    /// The user's grant with this index (nonce).
    Issued(u8),
    /// The attacker's forgery: names the user and binds (pay, v_attack, 1500) for the current
    /// session, but is signed with the attacker's key.
    Forged,
}

/// A model transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// A plain write.
    Write {
        /// Writer.
        writer: Who,
        /// Value carried.
        value: Val,
    },
    /// The agent paraphrases a slot.
    Paraphrase {
        /// Source slot.
        of: u8,
    },
    /// An allow-listed tool echoes a slot's value.
    Echo {
        /// The tool.
        tool: Who,
        /// Source slot.
        of: u8,
    },
    /// A caller reports a tool's output ([`SlotOp::Report`]).
    Report {
        /// Who reports it.
        caller: Who,
        /// The value it carries.
        value: Val,
        /// Whether an argument carries the value.
        args: bool,
    },
    /// The agent's bare echo of a slot it was handed ([`SlotOp::BareEcho`]).
    BareEcho {
        /// Source slot.
        of: u8,
    },
    /// A tool writes its own output ([`SlotOp::OwnOutput`]).
    OwnOutput {
        /// The tool.
        tool: Who,
        /// The value it carries.
        value: Val,
    },
    /// A principal attests a value.
    Attest {
        /// Attester.
        attester: Who,
        /// Value.
        value: Val,
    },
    /// The user issues a grant.
    Grant {
        /// Tool bound.
        tool: &'static str,
        /// Value bound.
        value: Val,
        /// Amount bound.
        amount: u32,
    },
    /// The session ends; the next begins.
    Tick,
    /// The agent proposes `pay(value, 1500)`.
    Act {
        /// The value.
        value: Val,
        /// The context items.
        context: Ctx,
        /// The grant presented, if any.
        grant: Option<Presented>,
    },
}

/// Counters shared with the caller (transitions evaluated during the search).
#[derive(Default)]
pub(crate) struct Stats {
    decisions: AtomicUsize,
    allow_no_push: AtomicUsize,
    allow_corroborated: AtomicUsize,
    allow_granted: AtomicUsize,
    allow_other: AtomicUsize,
    errors: AtomicUsize,
    first_errors: Mutex<Vec<String>>,
    verdicts: Mutex<HashMap<String, usize>>,
}

impl Stats {
    fn error(&self, e: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.first_errors.lock()
            && v.len() < 5
        {
            v.push(e);
        }
    }
    fn count(&self, r: &ActResult) {
        self.decisions.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.verdicts.lock() {
            match v.get_mut(r.verdict.as_str()) {
                Some(n) => *n += 1,
                None => {
                    v.insert(r.verdict.clone(), 1);
                }
            }
        }
        let counter = match r.allowed {
            None => return,
            Some(Allowed::NoUntrustedPush) => &self.allow_no_push,
            Some(Allowed::Corroborated) => &self.allow_corroborated,
            Some(Allowed::Granted) => &self.allow_granted,
            Some(Allowed::Other) => &self.allow_other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn allows(&self) -> AllowCounts {
        AllowCounts {
            decisions: self.decisions.load(Ordering::Relaxed),
            no_untrusted_push: self.allow_no_push.load(Ordering::Relaxed),
            corroborated: self.allow_corroborated.load(Ordering::Relaxed),
            granted: self.allow_granted.load(Ordering::Relaxed),
            other: self.allow_other.load(Ordering::Relaxed),
        }
    }
    pub(crate) fn verdicts(&self) -> BTreeMap<String, usize> {
        self.verdicts.lock().map(|v| v.iter().map(|(k, n)| (k.clone(), *n)).collect()).unwrap_or_default()
    }
    pub(crate) fn errors(&self) -> Vec<String> {
        let n = self.errors.load(Ordering::Relaxed);
        let mut v = self.first_errors.lock().map(|v| v.clone()).unwrap_or_default();
        if n > v.len() {
            v.push(format!("... {n} model errors in all"));
        }
        v
    }
}

/// Why an action was allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allowed {
    /// Real gate, Algorithm 1 step 3.
    NoUntrustedPush,
    /// Real gate: an untrusted-pushed value was corroborated (possibly with a grant for another).
    Corroborated,
    /// Real gate: only grants were needed.
    Granted,
    /// A baseline gate allowed it.
    Other,
}

/// What an action's decision did.
#[derive(Debug)]
struct ActResult {
    allowed: Option<Allowed>,
    consumed: Vec<u8>,
    new_elevations: Vec<Json>,
    verdict: String,
}

/// Everything a decision reads (the memo key; the gate is a pure function of it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DecideKey {
    /// The items the gate reads: the context's (or, for the lineage gate, every slot's).
    items: Vec<Json>,
    /// Context slot indices (lineage gate only).
    ctx: Vec<usize>,
    value: Val,
    attested: Vec<Json>,
    elevations: Vec<Json>,
    /// The presented grant: the user's (record, index, already consumed?) or the forgery.
    grant: Option<(Option<GrantRec>, u8, bool)>,
    session: u8,
}

/// What an admission reads: slot index, operation, value and the parent item's JSON.
type SlotKey = (usize, SlotOp, Val, Option<Json>);

/// Memo tables. Every real-code call is a pure function of its key (memwarden-core does no I/O),
/// so each distinct input is evaluated once and the result reused across states.
#[derive(Default)]
struct Caches {
    items: Mutex<HashMap<Json, Arc<MemoryItem>>>,
    slots: Mutex<HashMap<SlotKey, (Integrity, Json)>>,
    attestations: Mutex<HashMap<(Who, Val), Json>>,
    decisions: Mutex<HashMap<DecideKey, Arc<ActResult>>>,
    grants: Mutex<HashMap<(GrantRec, u8, bool), SignedGrant>>,
}

fn cached<K: std::hash::Hash + Eq, V: Clone>(m: &Mutex<HashMap<K, V>>, k: &K) -> Option<V> {
    m.lock().ok().and_then(|m| m.get(k).cloned())
}

fn remember<K: std::hash::Hash + Eq, V>(m: &Mutex<HashMap<K, V>>, k: K, v: V) {
    if let Ok(mut m) = m.lock() {
        m.insert(k, v);
    }
}

/// The model: one gate, one bound, the fixed world.
pub(crate) struct AuthorityModel {
    gate: GateKind,
    cfg: CheckConfig,
    authority: Authority,
    pub(crate) world: World,
    stats: Arc<Stats>,
    caches: Caches,
    /// Whether a Sec / non-malleability violation was already reported to the checker.
    reported: [AtomicBool; 2],
}

fn js<T: serde::Serialize>(v: &T) -> Result<Json, String> {
    serde_json::to_string(v).map(Json::new).map_err(|e| e.to_string())
}

fn nonce(g: u8) -> [u8; 16] {
    [g.wrapping_add(1); 16]
}

fn grant_index(n: &[u8; 16]) -> Option<u8> {
    (n[0] > 0 && n.iter().all(|b| *b == n[0])).then(|| n[0] - 1)
}

/// The text of `tool`'s output carrying `value` (every tool output in the model says the same).
/// The model's one action: `pay(value, 1500)` citing `context`, presenting `grants` (the tool
/// unregistered, so the system classes it a high-risk act whatever the request says).
pub(crate) fn pay_action(value: Val, context: Vec<ItemId>, grants: Vec<SignedGrant>) -> ActionRequest {
    ActionRequest {
        tool: TOOL.into(),
        kind: ActionKind::Act,
        risk: Risk::High,
        values: vec![ActionValue { key: KEY.into(), value: value.raw().into(), kind: ValueKind::Account, sources: vec![] }],
        amount: Some(ACT_AMOUNT.into()),
        context,
        grants,
    }
}

pub(crate) fn tool_text(tool: Who, value: Val) -> String {
    format!("{} lookup: account {} is on file.", tool.id(), value.raw())
}

fn byte(i: usize) -> u8 {
    u8::try_from(i).unwrap_or(u8::MAX)
}

impl AuthorityModel {
    pub(crate) fn new(gate: GateKind, cfg: CheckConfig, stats: Arc<Stats>) -> Result<Self, String> {
        let config = AuthorityConfig { k: cfg.k, origin_binding: gate != GateKind::NoOriginBinding, ..AuthorityConfig::default() };
        Ok(Self {
            gate,
            cfg,
            authority: Authority::new(config),
            world: World::new()?,
            stats,
            caches: Caches::default(),
            reported: Default::default(),
        })
    }

    /// Rebuild slot `i`'s item. Normally through the crate's validating decoder; with origin
    /// binding off the decoder refuses the items (a label above their origin), so the ablated
    /// system is modelled as handing the gate the admitted items themselves (replayed admission,
    /// checked to serialize to the stored JSON).
    fn item(&self, s: &ModelState, i: usize) -> Result<Arc<MemoryItem>, String> {
        let slot = s.slots.get(i).ok_or_else(|| format!("no slot {i}"))?;
        if let Some(item) = cached(&self.caches.items, &slot.json) {
            return Ok(item);
        }
        let item = if self.gate == GateKind::NoOriginBinding {
            let item = self.admit_slot(s, i, slot.op, slot.value)?.item().clone();
            if js(&item)? != slot.json {
                return Err(format!("replayed slot {i} differs from the stored one"));
            }
            item
        } else {
            serde_json::from_str(&slot.json).map_err(|e| format!("slot {i} does not decode: {e}"))?
        };
        let item = Arc::new(item);
        remember(&self.caches.items, Json::clone(&slot.json), Arc::clone(&item));
        Ok(item)
    }

    /// Does this gate's runtime track what each session was handed (memwarden's engine does;
    /// a lineage-edge system only has the edges agents declare)? No gate gets declared edges
    /// from the agent: paraphrases and echoes declare nothing, as a plain memory API allows.
    fn observes_sessions(&self) -> bool {
        self.gate != GateKind::LineageEdges
    }

    /// What the agent's session was handed before it wrote from `items`.
    fn observed(&self, items: &[&MemoryItem]) -> Observed {
        let mut o = Observed::clean();
        if self.observes_sessions() {
            o.observe_all(items.iter().copied());
        }
        o
    }

    /// Admit the item of slot `i` made by `op` (carrying `value`) through the real gate.
    fn admit_slot(&self, s: &ModelState, i: usize, op: SlotOp, value: Val) -> Result<AdmittedWrite, String> {
        let w = &self.world;
        let err = |e: WriteError| format!("admission of slot {i} refused: {e}");
        match op {
            SlotOp::Write(writer) => {
                let (text, route) = writer.write_text(value);
                let req = WriteRequest::new(w.namespace.clone(), text, route);
                self.authority.admit_write(w.principal(writer)?, &w.tenant, req, &[], slot_id(i), EPOCH_MS).map_err(err)
            }
            SlotOp::Paraphrase(j) => {
                // The agent was handed the parent and writes a paraphrase declaring no parent.
                let parent = self.item(s, usize::from(j))?;
                let req = WriteRequest::new(w.namespace.clone(), format!("Summary: the payee account is {}.", value.raw()), Route::Summary);
                let observed = self.observed(&[&parent]);
                self.authority.admit_write_observed(w.principal(Who::Agent)?, &w.tenant, req, &[], &observed, slot_id(i), EPOCH_MS).map_err(err)
            }
            SlotOp::Echo(tool, j) => {
                // The agent was handed the parent and types its value into a trusted tool,
                // declaring neither a source nor an input.
                let parent = self.item(s, usize::from(j))?;
                let args = [ToolArg { key: KEY.into(), value: value.raw().into(), kind: ValueKind::Account, sources: vec![] }];
                let output = tool_text(tool, value);
                let observed = self.observed(&[&parent]);
                self.authority
                    .admit_tool_output(
                        w.principal(Who::Agent)?,
                        &observed,
                        w.principal(tool)?,
                        &Observed::clean(),
                        Vouch::CallerReported,
                        &args,
                        &[],
                        &[],
                        &w.tenant,
                        w.namespace.clone(),
                        output,
                        slot_id(i),
                        EPOCH_MS,
                    )
                    .map_err(err)
            }
            SlotOp::Report(caller, with_arg) => {
                let args: Vec<ToolArg> =
                    if with_arg { vec![ToolArg { key: KEY.into(), value: value.raw().into(), kind: ValueKind::Account, sources: vec![] }] } else { Vec::new() };
                self.admit_reported(i, caller, &Observed::clean(), &args, value)
            }
            SlotOp::BareEcho(j) => {
                let parent = self.item(s, usize::from(j))?;
                let observed = self.observed(&[&parent]);
                self.admit_reported(i, Who::Agent, &observed, &[], value)
            }
            SlotOp::OwnOutput(tool) => self.admit_own(i, tool, value),
        }
    }

    /// `tool` writes its own output carrying `value` (authenticated as the tool).
    fn admit_own(&self, i: usize, tool: Who, value: Val) -> Result<AdmittedWrite, String> {
        let w = &self.world;
        let p = w.principal(tool)?;
        self.authority
            .admit_tool_output(p, &Observed::clean(), p, &Observed::clean(), Vouch::Writer, &[], &[], &[], &w.tenant, w.namespace.clone(), tool_text(tool, value), slot_id(i), EPOCH_MS)
            .map_err(|e| format!("admission of slot {i} refused: {e}"))
    }

    /// A caller's report of [`REPORTED_TOOL`]'s output through the real gate. Under
    /// [`GateKind::UnvouchedToolOutputs`] a report without arguments is admitted the way the
    /// pre-fix engine did: as the tool's own output, whoever reported it.
    fn admit_reported(&self, i: usize, caller: Who, observed: &Observed, args: &[ToolArg], value: Val) -> Result<AdmittedWrite, String> {
        if self.gate == GateKind::UnvouchedToolOutputs && args.is_empty() {
            return self.admit_own(i, REPORTED_TOOL, value);
        }
        let w = &self.world;
        self.authority
            .admit_tool_output(
                w.principal(caller)?,
                observed,
                w.principal(REPORTED_TOOL)?,
                &Observed::clean(),
                Vouch::CallerReported,
                args,
                &[],
                &[],
                &w.tenant,
                w.namespace.clone(),
                tool_text(REPORTED_TOOL, value),
                slot_id(i),
                EPOCH_MS,
            )
            .map_err(|e| format!("admission of slot {i} refused: {e}"))
    }

    /// The label and JSON of a new slot `i` (memoized admission).
    fn new_slot(&self, s: &ModelState, op: SlotOp, value: Val) -> Result<(Integrity, Json), String> {
        let i = s.slots.len();
        let parent = match op {
            SlotOp::Write(_) => None,
            SlotOp::Paraphrase(j) | SlotOp::Echo(_, j) | SlotOp::BareEcho(j) => Some(Json::clone(&s.slots.get(usize::from(j)).ok_or("no parent slot")?.json)),
            SlotOp::Report(..) | SlotOp::OwnOutput(_) => None,
        };
        let key = (i, op, value, parent);
        if let Some(v) = cached(&self.caches.slots, &key) {
            return Ok(v);
        }
        let admitted = self.admit_slot(s, i, op, value)?;
        let v = (admitted.item().label().integrity(), js(admitted.item())?);
        remember(&self.caches.slots, key, v.clone());
        Ok(v)
    }

    /// [`Self::signed_grant`] for the store `store` (the engine under check names its own).
    pub(crate) fn signed_grant_on(&self, s: &ModelState, presented: Presented, store: &str) -> Result<SignedGrant, String> {
        let sg = self.signed_grant(s, presented)?;
        let key = if matches!(presented, Presented::Forged) { &self.world.forger_key } else { &self.world.user_key };
        Ok(Grant { store: store.to_owned(), ..sg.grant }.sign(key))
    }

    /// The signed grant an action presents: the user's grant `Issued(g)`, or the attacker's
    /// forgery, for the model's own store ([`MODEL_STORE`]).
    pub(crate) fn signed_grant(&self, s: &ModelState, presented: Presented) -> Result<SignedGrant, String> {
        let (rec, g, forged) = match presented {
            Presented::Issued(g) => (*s.grants.get(usize::from(g)).ok_or_else(|| format!("no grant {g}"))?, g, false),
            Presented::Forged => (GrantRec { tool: TOOL, value: Val::Attack, amount: 1500, session: s.session }, FORGED, true),
        };
        if let Some(sg) = cached(&self.caches.grants, &(rec, g, forged)) {
            return Ok(sg);
        }
        let grant = Grant {
            tenant: self.world.tenant.clone(),
            store: MODEL_STORE.to_owned(),
            user: PrincipalId::new(Who::User.id()).map_err(|e| e.to_string())?,
            tool: rec.tool.into(),
            key: KEY.into(),
            value: NormValue::new(ValueKind::Account, rec.value.raw()).map_err(|e| e.to_string())?,
            amount: Some(rec.amount.to_string()),
            nonce: nonce(g),
            issued_ms: now_ms(rec.session),
            expires_ms: EPOCH_MS + (u64::from(rec.session) + 1) * SESSION_MS - 1,
        };
        let sg = grant.sign(if forged { &self.world.forger_key } else { &self.world.user_key });
        remember(&self.caches.grants, (rec, g, forged), sg.clone());
        Ok(sg)
    }

    fn context_slots(s: &ModelState, ctx: Ctx) -> Vec<usize> {
        match ctx {
            Ctx::Slot(i) => vec![usize::from(i)],
            Ctx::All => (0..s.slots.len()).collect(),
        }
    }

    /// Decide an action with this model's gate (memoized on everything the gate reads).
    fn decide(&self, s: &ModelState, value: Val, ctx: Ctx, grant: Option<Presented>) -> Result<Arc<ActResult>, String> {
        let ctx_slots = Self::context_slots(s, ctx);
        let json_of = |i: &usize| s.slots.get(*i).map(|sl| Json::clone(&sl.json)).ok_or_else(|| format!("no slot {i}"));
        let real = matches!(self.gate, GateKind::Real | GateKind::NoOriginBinding | GateKind::UnvouchedToolOutputs);
        let key = DecideKey {
            items: if self.gate == GateKind::LineageEdges {
                (0..s.slots.len()).map(|i| json_of(&i)).collect::<Result<_, _>>()?
            } else {
                ctx_slots.iter().map(json_of).collect::<Result<_, _>>()?
            },
            ctx: if self.gate == GateKind::LineageEdges { ctx_slots.clone() } else { Vec::new() },
            value,
            attested: if real { s.attested.iter().map(|(_, _, j)| Json::clone(j)).collect() } else { Vec::new() },
            elevations: if real { s.elevations.clone() } else { Vec::new() },
            grant: match (real, grant) {
                (true, Some(Presented::Issued(g))) => {
                    Some((Some(*s.grants.get(usize::from(g)).ok_or("no grant")?), g, s.used.contains(&g)))
                }
                (true, Some(Presented::Forged)) => Some((None, FORGED, s.used.contains(&FORGED))),
                _ => None,
            },
            session: if real { s.session } else { 0 },
        };
        if let Some(r) = cached(&self.caches.decisions, &key) {
            return Ok(r);
        }
        let items: Vec<Arc<MemoryItem>> = ctx_slots.iter().map(|&i| self.item(s, i)).collect::<Result<_, _>>()?;
        let r = Arc::new(match self.gate {
            GateKind::Real | GateKind::NoOriginBinding | GateKind::UnvouchedToolOutputs => self.decide_real(s, value, &items, grant)?,
            GateKind::ContentBased => {
                let marked = items.iter().find(|i| {
                    let f = fold(i.content());
                    f.contains("system") || f.contains("urgent")
                });
                match marked {
                    Some(i) => ActResult {
                        allowed: None,
                        consumed: vec![],
                        new_elevations: vec![],
                        verdict: format!("block (injection marker in {})", slot_name(&i.id())),
                    },
                    None => ActResult {
                        allowed: Some(Allowed::Other),
                        consumed: vec![],
                        new_elevations: vec![],
                        verdict: "allow (no injection marker in the context)".into(),
                    },
                }
            }
            GateKind::LineageEdges => {
                let all: Vec<Arc<MemoryItem>> = (0..s.slots.len()).map(|i| self.item(s, i)).collect::<Result<_, _>>()?;
                let mut seen: BTreeSet<ItemId> = BTreeSet::new();
                let mut todo: Vec<ItemId> = items.iter().map(|i| i.id()).collect();
                let mut tainted = None;
                while let Some(id) = todo.pop() {
                    if !seen.insert(id) {
                        continue;
                    }
                    let item = all.iter().find(|i| i.id() == id).ok_or_else(|| format!("edge to unknown item {id}"))?;
                    if item.label().integrity() == Integrity::Untrusted {
                        tainted = Some(id);
                        break;
                    }
                    todo.extend(item.parents().iter().map(|p| p.id));
                }
                match tainted {
                    Some(id) => ActResult {
                        allowed: None,
                        consumed: vec![],
                        new_elevations: vec![],
                        verdict: format!("block (recorded lineage reaches untrusted {})", slot_name(&id)),
                    },
                    None => ActResult {
                        allowed: Some(Allowed::Other),
                        consumed: vec![],
                        new_elevations: vec![],
                        verdict: "allow (no recorded edge reaches an untrusted item)".into(),
                    },
                }
            }
        });
        remember(&self.caches.decisions, key, Arc::clone(&r));
        Ok(r)
    }

    fn decide_real(&self, s: &ModelState, value: Val, items: &[Arc<MemoryItem>], grant: Option<Presented>) -> Result<ActResult, String> {
        let w = &self.world;
        let refs: Vec<&MemoryItem> = items.iter().map(|i| &**i).collect();
        // The acting session was handed exactly the context it acts on.
        let observed = self.observed(&refs);
        let attestations: Vec<Attestation> =
            s.attested.iter().map(|(_, _, j)| serde_json::from_str(j)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let elevations: Vec<Elevation> =
            s.elevations.iter().map(|j| serde_json::from_str(j)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let grants: Vec<SignedGrant> = grant.map(|g| self.signed_grant(s, g)).transpose()?.into_iter().collect();
        let action = pay_action(value, items.iter().map(|i| i.id()).collect(), grants);
        let lookup = |id: &PrincipalId| w.lookup(id);
        let used = |n: &[u8; 16]| grant_index(n).is_some_and(|g| s.used.contains(&g));
        let class = ActionClass::of(TOOL, None);
        let dctx = DecisionContext {
            tenant: &w.tenant,
            store: MODEL_STORE,
            now_ms: now_ms(s.session),
            actor: w.principal(Who::Agent)?,
            class: &class,
            items: &refs,
            attestations: &attestations,
            elevations: &elevations,
            principal: &lookup,
            grant_used: &used,
            session: &observed,
            session_witnesses: &refs,
            neighbours: &[],
        };
        let out = self.authority.decide(&action, &dctx);
        let v = out.verdict();
        let allowed = (v.decision == Decision::Allow).then(|| match v.rule {
            Rule::NoUntrustedPush | Rule::Supported => Allowed::NoUntrustedPush,
            Rule::Elevated if v.pushed.iter().any(|p| matches!(p.accepted, Some(Acceptance::Corroborated { .. }))) => Allowed::Corroborated,
            Rule::Granted => Allowed::Granted,
            _ => Allowed::Other,
        });
        let consumed = out
            .grant_uses()
            .iter()
            .map(|u| grant_index(&u.grant.grant.nonce).ok_or("consumed an unknown nonce"))
            .collect::<Result<_, _>>()?;
        let new_elevations = out.new_elevations().iter().map(js).collect::<Result<_, _>>()?;
        let rule = match &v.rule {
            Rule::GrantRefused { code, .. } => format!("grant refused: {code}"),
            r => serde_json::to_value(r).ok().and_then(|r| r.get("rule").and_then(|r| r.as_str()).map(str::to_owned)).unwrap_or_default(),
        };
        Ok(ActResult { allowed, consumed, new_elevations, verdict: format!("{} ({rule})", v.decision.as_str()) })
    }

    /// Ghost Sec for an allowed action: if a context slot descending from an untrusted write
    /// carries the value, the user stated that same value in a cited slot of its own (positive
    /// support: the user's statement), `k` distinct-domain trusted principals attested it, or a
    /// genuine, fresh, unused grant bound to (tool, value, amount) was consumed by this action.
    fn ghost_sec_ok(&self, s: &ModelState, value: Val, ctx: Ctx, grant: Option<Presented>, consumed: &[u8]) -> bool {
        self.ghost_sec_ok_on(s, value, &Self::context_slots(s, ctx), grant, consumed, &s.used)
    }

    /// [`AuthorityModel::ghost_sec_ok`] for an action whose context is exactly `slots`, with the
    /// grants `used` before it (what another implementation driven through the same steps, the
    /// engine, actually cited and consumed).
    pub(crate) fn ghost_sec_ok_on(&self, s: &ModelState, value: Val, slots: &[usize], grant: Option<Presented>, consumed: &[u8], used: &[u8]) -> bool {
        let pushed = slots.iter().any(|&i| s.slots.get(i).is_some_and(|sl| sl.ghost_untrusted && sl.value == value));
        if !pushed {
            return true;
        }
        let carriers: Vec<&Slot> = slots.iter().filter_map(|&i| s.slots.get(i)).filter(|sl| sl.value == value).collect();
        // The user's own statement: a write, or the user's report of a tool output.
        if carriers.iter().any(|sl| matches!(sl.op, SlotOp::Write(Who::User) | SlotOp::Report(Who::User, _))) {
            return true;
        }
        // Independent confirmations: honest trusted attesters, and honest trusted principals that
        // stated the value themselves anywhere in memory (a tool's own output, a tool's report;
        // an elevation the gate recorded from them outlives the context), each counted for the
        // domain of whoever made the claim.
        let stated_by = s.slots.iter().filter(|sl| sl.value == value).filter_map(|sl| match sl.op {
            SlotOp::OwnOutput(w) | SlotOp::Report(w, _) if w.ghost_trusted() => Some(w.ghost_domain()),
            _ => None,
        });
        let domains: BTreeSet<&str> =
            s.attested.iter().filter(|(w, v, _)| *v == value && w.ghost_trusted()).map(|(w, _, _)| w.ghost_domain()).chain(stated_by).collect();
        if domains.len() >= self.cfg.k.max(1) {
            return true;
        }
        let Some(Presented::Issued(g)) = grant else {
            return false;
        };
        s.grants.get(usize::from(g)).is_some_and(|rec| {
            rec.tool == TOOL
                && rec.value == value
                && rec.amount.to_string() == ACT_AMOUNT
                && rec.session == s.session
                && !used.contains(&g)
                && consumed.contains(&g)
        })
    }

    fn apply(&self, s: &ModelState, step: Step) -> Result<ModelState, String> {
        let mut n = s.clone();
        match step {
            Step::Write { writer, value } => {
                let op = SlotOp::Write(writer);
                let (label, json) = self.new_slot(s, op, value)?;
                n.slots.push(Slot { op, value, ghost_untrusted: writer.ghost_untrusted_origin(), label, json });
            }
            Step::Report { caller, value, args } => {
                let op = SlotOp::Report(caller, args);
                let (label, json) = self.new_slot(s, op, value)?;
                // A report is the caller's claim: it may not rise above the caller's own label.
                let caller_label = self.world.principal(caller)?.integrity();
                if label > caller_label {
                    n.nm_violated = true;
                }
                n.slots.push(Slot { op, value, ghost_untrusted: caller.ghost_untrusted_origin(), label, json });
            }
            Step::OwnOutput { tool, value } => {
                let op = SlotOp::OwnOutput(tool);
                let (label, json) = self.new_slot(s, op, value)?;
                n.slots.push(Slot { op, value, ghost_untrusted: tool.ghost_untrusted_origin(), label, json });
            }
            Step::Paraphrase { of } | Step::Echo { of, .. } | Step::BareEcho { of } => {
                let op = match step {
                    Step::Echo { tool, .. } => SlotOp::Echo(tool, of),
                    Step::BareEcho { .. } => SlotOp::BareEcho(of),
                    _ => SlotOp::Paraphrase(of),
                };
                let src = s.slots.get(usize::from(of)).ok_or_else(|| format!("no slot {of}"))?;
                let (label, json) = self.new_slot(s, op, src.value)?;
                if label > src.label {
                    n.nm_violated = true;
                }
                n.slots.push(Slot { op, value: src.value, ghost_untrusted: src.ghost_untrusted, label, json });
            }
            Step::Attest { attester, value } => {
                let json = match cached(&self.caches.attestations, &(attester, value)) {
                    Some(j) => j,
                    None => {
                        let admitted = self
                            .authority
                            .admit_attestation(self.world.principal(attester)?, &Observed::clean(), KEY, value.raw(), ValueKind::Account, &[], EPOCH_MS)
                            .map_err(|e| format!("attestation refused: {e}"))?;
                        let j = js(admitted.attestation())?;
                        remember(&self.caches.attestations, (attester, value), Json::clone(&j));
                        j
                    }
                };
                n.attested.push((attester, value, json));
                n.attested.sort();
            }
            Step::Grant { tool, value, amount } => {
                n.grants.push(GrantRec { tool, value, amount, session: s.session });
            }
            Step::Tick => {
                n.session = s.session.saturating_add(1);
            }
            Step::Act { value, context, grant } => {
                let r = self.decide(s, value, context, grant)?;
                self.stats.count(&r);
                if r.allowed.is_none() && (!r.consumed.is_empty() || !r.new_elevations.is_empty()) {
                    return Err("a denied action changed state".into());
                }
                for g in &r.consumed {
                    if !n.used.contains(g) {
                        n.used.push(*g);
                    }
                }
                n.used.sort_unstable();
                n.elevations.extend(r.new_elevations.iter().cloned());
                n.elevations.sort();
                if r.allowed.is_some() && !self.ghost_sec_ok(s, value, context, grant, &r.consumed) {
                    n.sec_violated = true;
                }
            }
        }
        Ok(n)
    }

    /// A readable line for one step of a trace (`post` is the state after it).
    pub(crate) fn describe(&self, s: &ModelState, step: Step, post: Option<&ModelState>) -> String {
        let label_of = |i: usize| post.and_then(|p| p.slots.get(i)).map(|sl| sl.label.as_str()).unwrap_or("?");
        let i = s.slots.len();
        match step {
            Step::Write { writer, value } => {
                let origin = self.world.principal(writer).map(|p| p.origin().as_str()).unwrap_or("?");
                format!("write({} [{origin}], {}) => slot {i}, label {}", writer.id(), value.short(), label_of(i))
            }
            Step::Paraphrase { of } => {
                let edges = if self.observes_sessions() { format!("no declared parent; session saw slot {of}") } else { "no recorded parent".into() };
                format!("paraphrase(slot {of}) by agent => slot {i}, label {}, {edges}", label_of(i))
            }
            Step::Echo { tool, of } => format!("echo({}, slot {of}) => slot {i}, label {}", tool.id(), label_of(i)),
            Step::Report { caller, value, args } => {
                let kind = self.world.principal(caller).map(|p| p.kind.as_str()).unwrap_or("?");
                let with = if args { "with the value as argument" } else { "no arguments" };
                format!("report_tool_output({} [{kind}] reports {}, {}, {with}) => slot {i}, label {}", caller.id(), REPORTED_TOOL.id(), value.short(), label_of(i))
            }
            Step::BareEcho { of } => {
                format!("report_tool_output(agent reports {}, value of slot {of}, no arguments; session saw slot {of}) => slot {i}, label {}", REPORTED_TOOL.id(), label_of(i))
            }
            Step::OwnOutput { tool, value } => format!("tool_output({} writes its own, {}) => slot {i}, label {}", tool.id(), value.short(), label_of(i)),
            Step::Attest { attester, value } => {
                let label = post
                    .and_then(|p| p.attested.iter().find(|(w, v, _)| *w == attester && *v == value))
                    .and_then(|(_, _, j)| serde_json::from_str::<Attestation>(j).ok())
                    .map(|a| a.label.as_str())
                    .unwrap_or("?");
                format!("attest({}, {}) => label {label}", attester.id(), value.short())
            }
            Step::Grant { tool, value, amount } => {
                format!("grant(user signs {tool} {}, amount {amount}) => grant #{} in session {}", value.short(), s.grants.len(), s.session)
            }
            Step::Tick => format!("session_tick => session {}", s.session.saturating_add(1)),
            Step::Act { value, context, grant } => {
                let ctx = match context {
                    Ctx::Slot(j) => format!("slot {j}"),
                    Ctx::All => "all slots".into(),
                };
                let g = match grant {
                    None => "no grant".into(),
                    Some(Presented::Issued(g)) => format!("grant #{g}"),
                    Some(Presented::Forged) => "forged grant".into(),
                };
                let verdict = self.decide(s, value, context, grant).map(|r| r.verdict.clone()).unwrap_or_else(|e| format!("error: {e}"));
                let flag = if post.is_some_and(|p| p.sec_violated) && !s.sec_violated { " -- Sec VIOLATED" } else { "" };
                format!("act(pay {}, amount {ACT_AMOUNT}, context [{ctx}], {g}) => {verdict}{flag}", value.short())
            }
        }
    }
}

fn slot_name(id: &ItemId) -> String {
    slot_of(id).map(|i| format!("slot {i}")).unwrap_or_else(|| id.to_string())
}

impl fmt::Debug for AuthorityModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorityModel").field("gate", &self.gate).field("cfg", &self.cfg).finish()
    }
}

impl AuthorityModel {
    /// The property condition. Stateright's BFS checker keeps the *last* violating state it is
    /// told about, and the violation flags are sticky, so every descendant of a violating state
    /// violates too; reporting only the first violating state the search pops (breadth-first, one
    /// thread: a shortest one) keeps the counterexample minimal.
    fn holds(&self, property: usize, violated: bool) -> bool {
        !violated || self.reported.get(property).is_none_or(|r| r.swap(true, Ordering::Relaxed))
    }
}

impl Model for AuthorityModel {
    type State = ModelState;
    type Action = Step;

    fn init_states(&self) -> Vec<ModelState> {
        vec![ModelState::default()]
    }

    fn actions(&self, s: &ModelState, out: &mut Vec<Step>) {
        if s.sec_violated {
            // The search does not continue past a Sec violation (its trace is the counterexample).
            return;
        }
        let len = s.slots.len();
        if len < self.cfg.slots {
            for (writer, value) in WRITES {
                out.push(Step::Write { writer, value });
            }
            for of in 0..len {
                let of = byte(of);
                out.push(Step::Paraphrase { of });
                for tool in ECHO_TOOLS {
                    out.push(Step::Echo { tool, of });
                }
                if self.cfg.tool_outputs {
                    out.push(Step::BareEcho { of });
                }
            }
            if self.cfg.tool_outputs {
                for (caller, value) in REPORTS {
                    for args in [false, true] {
                        out.push(Step::Report { caller, value, args });
                    }
                }
                out.push(Step::OwnOutput { tool: REPORTED_TOOL, value: Val::Legit });
            }
        }
        for (attester, value) in ATTESTS {
            if !s.attested.iter().any(|(w, _, _)| *w == attester) {
                out.push(Step::Attest { attester, value });
            }
        }
        if s.grants.len() < GRANTS_MAX {
            for (tool, value, amount) in GRANTS {
                out.push(Step::Grant { tool, value, amount });
            }
        }
        if usize::from(s.session) + 1 < self.cfg.sessions {
            out.push(Step::Tick);
        }
        let mut contexts: Vec<Ctx> = (0..len).map(|i| Ctx::Slot(byte(i))).collect();
        if len > 1 {
            contexts.push(Ctx::All);
        }
        for value in [Val::Attack, Val::Legit] {
            for &context in &contexts {
                out.push(Step::Act { value, context, grant: None });
                // Grants are presented with single-item contexts only: a grant binds (tool, value,
                // amount), not items, and every presentation the gate has to weigh costs it a
                // signature verification, which with whole-memory contexts dominated the search.
                if context == Ctx::All {
                    continue;
                }
                out.push(Step::Act { value, context, grant: Some(Presented::Forged) });
                for g in 0..s.grants.len() {
                    out.push(Step::Act { value, context, grant: Some(Presented::Issued(byte(g))) });
                }
            }
        }
    }

    fn next_state(&self, s: &ModelState, step: Step) -> Option<ModelState> {
        match self.apply(s, step) {
            // An action that changes nothing is a self-loop; `None` says so without rehashing.
            Ok(n) if n == *s => None,
            Ok(n) => Some(n),
            Err(e) => {
                self.stats.error(format!("{step:?}: {e}"));
                None
            }
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(crate::SEC, |m: &Self, s: &ModelState| m.holds(0, s.sec_violated)),
            Property::always(crate::NON_MALLEABILITY, |m: &Self, s: &ModelState| m.holds(1, s.nm_violated)),
        ]
    }
}
