//! The lifecycle view of a memory: what the scorer and the gates read.
//!
//! memwarden-core's [`MemoryItem`] holds the text, route, parents, scope, status and
//! [`GuardState`]; the lifecycle layer also needs a few operational fields core does not have yet
//! (memory type, source tags, source-agent trust, team / quarantined scope, allowed task classes,
//! carried restrictions). [`LifecycleMemory`] holds them all; [`LifecycleMemory::from_item`]
//! builds one from a core item.
//!
//! Every field here is *operational metadata recorded by the memory manager* (the write path,
//! from the authenticated channel), never something the writer's text asserts about itself.

use memwarden_core::ids::PrincipalId;
use memwarden_core::item::{GuardState, MemoryItem, Readers, Route, Status, Taint, Visibility};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Lifecycle scope (spec "Guard state per memory"). Core has private / shared / revoked
/// visibility; `Team` corresponds to core's `Shared`, `Blocked` to `Revoked`, and `Quarantined`
/// has no core counterpart yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleScope {
    /// One agent's store.
    Private,
    /// A shared (team) store.
    Team,
    /// Held back by a gate.
    Quarantined,
    /// Blocked for good (kept for audit).
    Blocked,
}

impl LifecycleScope {
    /// From core's visibility.
    pub fn from_visibility(v: Visibility) -> Self {
        match v {
            Visibility::Private => Self::Private,
            Visibility::Shared => Self::Team,
            Visibility::Revoked => Self::Blocked,
        }
    }
    /// Whether the scope lets the item be read at all.
    pub fn is_open(self) -> bool {
        matches!(self, Self::Private | Self::Team)
    }
}

/// The source descriptor of a route, as the scorer's markers see it. Differs from
/// [`Route::as_str`] only for [`Route::Direct`], which is the paper's direct-memory injection
/// route (`direct_memory_injection`).
pub fn route_source_name(route: Route) -> &'static str {
    match route {
        Route::Direct => "direct_memory_injection",
        other => other.as_str(),
    }
}

/// Rank of a taint, least to most restrictive: clean < unverified < external < poisoned.
pub fn taint_rank(t: Taint) -> u8 {
    match t {
        Taint::Clean => 0,
        Taint::Unverified => 1,
        Taint::External => 2,
        Taint::Poisoned => 3,
    }
}

/// The more restrictive of two taints.
pub fn taint_max(a: Taint, b: Taint) -> Taint {
    if taint_rank(a) >= taint_rank(b) { a } else { b }
}

/// Rank of a status, least to most restrictive: active < quarantined < blocked < superseded <
/// revoked.
pub fn status_rank(s: Status) -> u8 {
    match s {
        Status::Active => 0,
        Status::Quarantined => 1,
        Status::Blocked => 2,
        Status::Superseded => 3,
        Status::Revoked => 4,
    }
}

/// The more restrictive of two statuses.
pub fn status_max(a: Status, b: Status) -> Status {
    if status_rank(a) >= status_rank(b) { a } else { b }
}

/// Restrictions imposed upstream that travel with an item: through the broker into another
/// agent's context, and into anything derived from it. Merging keeps the most restrictive of
/// each; nothing downstream can relax them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restrictions {
    /// Who may receive the item (`All` = no upstream narrowing).
    pub readers: Readers,
    /// Task classes the item may serve (`None` = any).
    pub task_classes: Option<BTreeSet<String>>,
    /// Taint is never lower than this.
    pub taint_floor: Taint,
    /// Utility is never above this.
    pub q_max: Option<f64>,
    /// Trust is never above this.
    pub tau_max: Option<f64>,
    /// Hazard is never below this.
    pub h_min: Option<f64>,
    /// The text carries the unverified-note prefix (a rewrite happened upstream).
    pub unverified_note: bool,
}

impl Default for Restrictions {
    fn default() -> Self {
        Self {
            readers: Readers::All,
            task_classes: None,
            taint_floor: Taint::Clean,
            q_max: None,
            tau_max: None,
            h_min: None,
            unverified_note: false,
        }
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}
fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) | (None, x) => x,
    }
}

/// Intersection of two optional task-class sets (`None` = unrestricted).
pub fn intersect_task_classes(a: &Option<BTreeSet<String>>, b: &Option<BTreeSet<String>>) -> Option<BTreeSet<String>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.intersection(y).cloned().collect()),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

/// Whether `class` is admitted by `allowed` (`None` = any class; a missing class is admitted only
/// when unrestricted).
pub fn task_class_admitted(allowed: &Option<BTreeSet<String>>, class: Option<&str>) -> bool {
    match (allowed, class) {
        (None, _) => true,
        (Some(set), Some(c)) => set.contains(c),
        (Some(_), None) => false,
    }
}

impl Restrictions {
    /// The most restrictive combination of the two.
    #[must_use]
    pub fn merge(&self, other: &Restrictions) -> Restrictions {
        Restrictions {
            readers: self.readers.intersect(&other.readers),
            task_classes: intersect_task_classes(&self.task_classes, &other.task_classes),
            taint_floor: taint_max(self.taint_floor, other.taint_floor),
            q_max: min_opt(self.q_max, other.q_max),
            tau_max: min_opt(self.tau_max, other.tau_max),
            h_min: max_opt(self.h_min, other.h_min),
            unverified_note: self.unverified_note || other.unverified_note,
        }
    }

    /// Apply the caps and the taint floor to a guard state.
    #[must_use]
    pub fn clamp_guard(&self, g: &GuardState) -> GuardState {
        let mut out = g.clone();
        if let Some(m) = self.q_max {
            out.q = out.q.min(m);
        }
        if let Some(m) = self.tau_max {
            out.tau = out.tau.min(m);
        }
        if let Some(m) = self.h_min {
            out.h = out.h.max(m);
        }
        out.taint = taint_max(out.taint, self.taint_floor);
        out
    }
}

/// The guard-state numbers a decision read (logged with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardSnapshot {
    /// Utility.
    pub q: f64,
    /// Trust.
    pub tau: f64,
    /// Hazard.
    pub h: f64,
    /// Taint.
    pub taint: Taint,
    /// Status.
    pub status: Status,
    /// Scope.
    pub scope: LifecycleScope,
    /// Effective source-agent trust.
    pub source_agent_trust: f64,
}

/// A memory as the lifecycle layer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleMemory {
    /// The scored text: intent + "\n" + experience ([`compose_text`]), or the content.
    pub text: String,
    /// How it entered (core's route).
    pub route: Route,
    /// Further operational source tags recorded by the memory manager, e.g. `query_only`,
    /// `bridge`, `post_task_successful_experience` (matched by the provenance markers).
    #[serde(default)]
    pub source_tags: Vec<String>,
    /// Memory type, e.g. `episodic_experience`, `procedural_demonstration`.
    #[serde(default)]
    pub memory_type: String,
    /// Descriptors of the parents (their routes / source descriptors), for the lineage markers.
    #[serde(default)]
    pub parents: Vec<String>,
    /// Lifecycle scope.
    pub scope: LifecycleScope,
    /// Operational status.
    pub status: Status,
    /// Guard state (core's).
    pub guard: GuardState,
    /// Stored source-agent trust (`None`, or a stored 0, reads as the default .5).
    #[serde(default)]
    pub source_agent_trust: Option<f64>,
    /// The owner (always admitted by the scope check).
    #[serde(default)]
    pub owner: Option<PrincipalId>,
    /// Allowed agents (core's reader set). Defaults to nobody but the owner.
    #[serde(default = "nobody")]
    pub readers: Readers,
    /// Allowed task classes (`None` = any).
    #[serde(default)]
    pub task_classes: Option<BTreeSet<String>>,
    /// Restrictions carried from upstream.
    #[serde(default)]
    pub carried: Restrictions,
}

fn nobody() -> Readers {
    Readers::Only(BTreeSet::new())
}

/// The scored text of an experience memory: `intent + "\n" + experience`.
pub fn compose_text(intent: &str, experience: &str) -> String {
    let mut s = String::with_capacity(intent.len() + 1 + experience.len());
    s.push_str(intent);
    s.push('\n');
    s.push_str(experience);
    s
}

impl LifecycleMemory {
    /// A private, active memory of `owner`, readable only by its owner, with the given guard
    /// state and no other metadata.
    pub fn new(owner: PrincipalId, text: impl Into<String>, route: Route, guard: GuardState) -> Self {
        Self {
            text: text.into(),
            route,
            source_tags: Vec::new(),
            memory_type: String::new(),
            parents: Vec::new(),
            scope: LifecycleScope::Private,
            status: Status::Active,
            guard,
            source_agent_trust: None,
            owner: Some(owner),
            readers: nobody(),
            task_classes: None,
            carried: Restrictions::default(),
        }
    }

    /// The lifecycle view of a core item. Parents' descriptors, memory type, source tags,
    /// source-agent trust and task classes are not in core; fill them in afterwards. Core's
    /// `EdgeKind`s say nothing about where a parent came from, so `parents` starts empty.
    pub fn from_item(item: &MemoryItem) -> Self {
        Self {
            text: item.content().to_owned(),
            route: item.route(),
            source_tags: Vec::new(),
            memory_type: String::new(),
            parents: Vec::new(),
            scope: LifecycleScope::from_visibility(item.scope().visibility),
            status: item.status(),
            guard: item.guard().clone(),
            source_agent_trust: None,
            owner: Some(item.scope().owner.clone()),
            readers: item.scope().readers.clone(),
            task_classes: None,
            carried: Restrictions::default(),
        }
    }

    /// The lowercased source descriptor: route name and source tags.
    pub fn source_descriptor(&self) -> String {
        let mut s = route_source_name(self.route).to_owned();
        for t in &self.source_tags {
            s.push(' ');
            s.push_str(t);
        }
        s.to_lowercase()
    }

    /// Whether `agent` is in scope (owner or reader).
    pub fn admits(&self, agent: &PrincipalId) -> bool {
        self.owner.as_ref() == Some(agent) || self.readers.admits(agent)
    }

    /// The item's own restrictions merged with those it carries: what travels with it.
    pub fn effective_restrictions(&self) -> Restrictions {
        let own = Restrictions {
            readers: match &self.owner {
                // The owner is always a reader of its own item.
                Some(o) => match &self.readers {
                    Readers::All => Readers::All,
                    Readers::Only(set) => {
                        let mut s = set.clone();
                        s.insert(o.clone());
                        Readers::Only(s)
                    }
                },
                None => self.readers.clone(),
            },
            task_classes: self.task_classes.clone(),
            taint_floor: self.guard.taint,
            q_max: None,
            tau_max: None,
            h_min: None,
            unverified_note: false,
        };
        own.merge(&self.carried)
    }
}
