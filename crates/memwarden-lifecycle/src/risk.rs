//! [`RiskScorer`]: the eight signals and the unified risk `r` (spec "Risk r", paper Table 1).
//!
//! `r = .24 p + .20 l + .14 s + .14 i + .12 b + .10 t + .04 d + .02 a`, every signal clipped to
//! `[0, 1]` and `r` too. Deterministic: regular expressions and substring markers over the text
//! and operational metadata; no model call, no clock, no randomness.

use crate::config::{ConfigError, LifecycleConfig};
use crate::memory::{LifecycleMemory, LifecycleScope};
use crate::rules::{CompiledRules, RuleError, RuleSet};
use memwarden_core::item::Taint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Clip to `[0, 1]`. NaN maps to 1 (the most restrictive reading of a risk); inputs are checked
/// to be finite before scoring, so this never happens on the scorer's own path.
pub fn clip01(x: f64) -> f64 {
    if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) }
}

/// Why an input could not be scored. A gate that meets one of these fails closed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case", tag = "error")]
pub enum ScoreError {
    /// The memory text is larger than `limits.text_bytes_max`.
    #[error("memory text is {bytes} bytes, more than {max}")]
    TextTooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The query is larger than `limits.query_bytes_max`.
    #[error("query is {bytes} bytes, more than {max}")]
    QueryTooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// More retrieval candidates than `limits.candidates_max`.
    #[error("{count} retrieval candidates, more than {max}")]
    TooManyCandidates {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More parent descriptors than `limits.parents_max`.
    #[error("{count} parents, more than {max}")]
    TooManyParents {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More source tags than `limits.source_tags_max`.
    #[error("{count} source tags, more than {max}")]
    TooManySourceTags {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A parent descriptor, source tag or memory type is longer than `limits.marker_bytes_max`.
    #[error("{field} entry is {bytes} bytes, more than {max}")]
    MarkerTooLong {
        /// Which field.
        field: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A number is NaN or infinite.
    #[error("{field} is not a finite number")]
    NonFinite {
        /// Which field.
        field: &'static str,
    },
}

/// Why a [`RiskScorer`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
pub enum LifecycleError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The rule set is invalid.
    #[error(transparent)]
    Rules(#[from] RuleError),
}

/// Retrieval-time context: the query, the candidate's similarity to it and its answer-key share
/// among the candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrievalContext<'a> {
    /// The query text.
    pub query: &'a str,
    /// Similarity of query and memory (cosine, in `[-1, 1]`).
    pub similarity: f64,
    /// Share of keyed candidates with this memory's answer key (0 if it has none).
    pub cluster_share: f64,
}

/// What each signal saw (counts and flags; never text).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SignalEvidence {
    /// `p`: a +.45 source marker matched.
    pub route_primary: bool,
    /// `p`: a +.30 source marker matched.
    pub route_secondary: bool,
    /// `p`: the team-scope low-trust term applied.
    pub team_low_trust: bool,
    /// `l`: the lineage markers present (names from the rule set).
    pub lineage_markers: Vec<String>,
    /// `s`: distinct self-claim patterns matched.
    pub self_claim_matches: u32,
    /// `s`: the +.18 unverified-claim term applied.
    pub self_claim_bonus: bool,
    /// `i`: a forbidden directive matched.
    pub forbidden_directive: bool,
    /// `i`: distinct counted instruction patterns matched.
    pub instruction_matches: u32,
    /// `b`: distinct answer-binding patterns matched.
    pub answer_binding_matches: u32,
    /// `t`: a trigger cue matched.
    pub trigger_cue: bool,
    /// `t`: a `##token` matched.
    pub trigger_hash_token: bool,
    /// `t`: a long phrase in a text mentioning "trigger".
    pub trigger_long_phrase: bool,
    /// `t` at retrieval: the overlap bonus applied.
    pub trigger_overlap_bonus: bool,
    /// `t` at retrieval: the query-trigger similarity bonus applied.
    pub trigger_query_bonus: bool,
    /// Query–memory token overlap (retrieval only).
    pub query_overlap: Option<f64>,
    /// Similarity (retrieval only).
    pub similarity: Option<f64>,
    /// Answer-key share among candidates (retrieval only).
    pub cluster_share: Option<f64>,
    /// `a`: the effective source-agent trust.
    pub effective_agent_trust: f64,
}

/// Every signal, in `[0, 1]`, and the weighted total `r`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RiskBreakdown {
    /// `p` provenance.
    pub provenance: f64,
    /// `l` lineage.
    pub lineage: f64,
    /// `s` self-claim.
    pub self_claim: f64,
    /// `i` instruction-likeness.
    pub instruction: f64,
    /// `b` answer binding.
    pub answer_binding: f64,
    /// `t` trigger sensitivity.
    pub trigger: f64,
    /// `d` cluster dominance.
    pub cluster: f64,
    /// `a` agent distrust.
    pub agent_distrust: f64,
    /// `r` the weighted total.
    pub total: f64,
    /// What the signals saw.
    pub evidence: SignalEvidence,
}

impl RiskBreakdown {
    /// The named pieces of evidence that fired, in a fixed order — what a reader is shown next
    /// to a memory (`external_source`, `external_lineage`, `self_claim`, `forbidden_directive`,
    /// `instruction_like`, `answer_binding`, `trigger_cue`, `cluster_dominance`,
    /// `low_reputation_writer`). Each is specific evidence the scorer saw, not a threshold on the
    /// total.
    pub fn flags(&self) -> Vec<&'static str> {
        let e = &self.evidence;
        let mut out = Vec::new();
        let mut flag = |on: bool, name: &'static str| {
            if on {
                out.push(name);
            }
        };
        flag(e.route_primary || e.route_secondary, "external_source");
        flag(!e.lineage_markers.is_empty(), "external_lineage");
        flag(e.self_claim_matches > 0, "self_claim");
        flag(e.forbidden_directive, "forbidden_directive");
        flag(e.instruction_matches > 0, "instruction_like");
        flag(e.answer_binding_matches > 0, "answer_binding");
        flag(e.trigger_cue || e.trigger_hash_token || e.trigger_long_phrase, "trigger_cue");
        flag(self.cluster > 0.0, "cluster_dominance");
        // The read firewall's own evidence bar for a writer's reputation.
        flag(e.effective_agent_trust < crate::config::EVIDENCE_REPUTATION_MIN, "low_reputation_writer");
        out
    }
}

/// Base trigger score of a text and which cues fired.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct TriggerBase {
    score: f64,
    cue: bool,
    hash_token: bool,
    long_phrase: bool,
}

/// The risk scorer: a validated [`LifecycleConfig`] and a compiled [`RuleSet`]. Build once,
/// share freely (it is immutable).
#[derive(Debug, Clone)]
pub struct RiskScorer {
    config: LifecycleConfig,
    rules: CompiledRules,
}

impl RiskScorer {
    /// Validate the configuration and compile the rules.
    pub fn new(config: LifecycleConfig, rules: &RuleSet) -> Result<Self, LifecycleError> {
        config.validate()?;
        let rules = rules.compile()?;
        Ok(Self { config, rules })
    }

    /// The specification's configuration and the English rule set.
    pub fn with_defaults() -> Result<Self, LifecycleError> {
        Self::new(LifecycleConfig::default(), &RuleSet::english())
    }

    /// The configuration in force.
    pub fn config(&self) -> &LifecycleConfig {
        &self.config
    }

    /// The compiled rules.
    pub fn rules(&self) -> &CompiledRules {
        &self.rules
    }

    /// Check a memory against the input limits and for non-finite numbers.
    pub fn check_memory(&self, m: &LifecycleMemory) -> Result<(), ScoreError> {
        let l = &self.config.limits;
        if m.text.len() > l.text_bytes_max {
            return Err(ScoreError::TextTooLarge { bytes: m.text.len(), max: l.text_bytes_max });
        }
        if m.parents.len() > l.parents_max {
            return Err(ScoreError::TooManyParents { count: m.parents.len(), max: l.parents_max });
        }
        if m.source_tags.len() > l.source_tags_max {
            return Err(ScoreError::TooManySourceTags { count: m.source_tags.len(), max: l.source_tags_max });
        }
        let long = |field: &'static str, s: &str| {
            if s.len() > l.marker_bytes_max {
                Err(ScoreError::MarkerTooLong { field, bytes: s.len(), max: l.marker_bytes_max })
            } else {
                Ok(())
            }
        };
        long("memory_type", &m.memory_type)?;
        for p in &m.parents {
            long("parents", p)?;
        }
        for t in &m.source_tags {
            long("source_tags", t)?;
        }
        for (field, v) in
            [("guard.q", m.guard.q), ("guard.tau", m.guard.tau), ("guard.h", m.guard.h), ("guard.risk", m.guard.risk)]
        {
            if !v.is_finite() {
                return Err(ScoreError::NonFinite { field });
            }
        }
        if let Some(t) = m.source_agent_trust
            && !t.is_finite()
        {
            return Err(ScoreError::NonFinite { field: "source_agent_trust" });
        }
        for (field, v) in [
            ("carried.q_max", m.carried.q_max),
            ("carried.tau_max", m.carried.tau_max),
            ("carried.h_min", m.carried.h_min),
        ] {
            if v.is_some_and(|x| !x.is_finite()) {
                return Err(ScoreError::NonFinite { field });
            }
        }
        Ok(())
    }

    /// Check a query against the input limits.
    pub fn check_query(&self, query: &str) -> Result<(), ScoreError> {
        let max = self.config.limits.query_bytes_max;
        if query.len() > max { Err(ScoreError::QueryTooLarge { bytes: query.len(), max }) } else { Ok(()) }
    }

    /// The effective source-agent trust: the stored value clipped, or the default (.5) when none
    /// is stored or the stored value is 0 (the authors' lookup, kept as the spec says).
    pub fn effective_agent_trust(&self, stored: Option<f64>) -> f64 {
        let default = self.config.signals.agent_trust_default;
        match stored {
            None => default,
            Some(x) if x == 0.0 || x.is_nan() => default,
            Some(x) => clip01(x),
        }
    }

    /// Whether a forbidden directive matches (the "instruction-like" test of the derivation and
    /// the retrieval terms).
    pub fn is_forbidden(&self, text: &str) -> bool {
        self.rules.instruction_forbidden.is_match(text)
    }

    fn trigger_base(&self, text: &str) -> TriggerBase {
        let c = &self.config.signals;
        let cue = self.rules.trigger_cues.is_match(text);
        let hash_token = self.rules.trigger_hash_tokens.is_match(text);
        let long_phrase = self.rules.trigger_long_phrases.is_match(text) && self.rules.trigger_words.is_match(text);
        let mut score = 0.0;
        if cue {
            score += c.trigger_cue;
        }
        if hash_token {
            score += c.trigger_hash_token;
        }
        if long_phrase {
            score += c.trigger_long_phrase;
        }
        TriggerBase { score: clip01(score), cue, hash_token, long_phrase }
    }

    /// Base trigger score of any text (the memory side at write time; the query side of the
    /// retrieval overlap bonus).
    pub fn trigger_score(&self, text: &str) -> f64 {
        self.trigger_base(text).score
    }

    fn tokens(&self, text: &str) -> BTreeSet<String> {
        let lowered = text.to_lowercase();
        self.rules
            .token
            .find_iter(&lowered)
            .map(|m| m.as_str())
            .filter(|t| !self.rules.stop_words.iter().any(|s| s == t))
            .map(str::to_owned)
            .collect()
    }

    /// Query–memory token overlap `|Q∩M| / max(1, min(|Q|, |M|))`, 0 when either side has no
    /// tokens.
    pub fn query_overlap(&self, query: &str, memory_text: &str) -> f64 {
        let q = self.tokens(query);
        let m = self.tokens(memory_text);
        if q.is_empty() || m.is_empty() {
            return 0.0;
        }
        let both = q.intersection(&m).count();
        both as f64 / (q.len().min(m.len()).max(1)) as f64
    }

    /// The A–E answer key of a text: the first extractor (priority order) that matches.
    pub fn answer_key(&self, text: &str) -> Option<char> {
        self.rules.answer_keys.iter().find_map(|re| {
            re.captures(text)
                .and_then(|c| c.get(1))
                .and_then(|g| g.as_str().chars().next())
                .map(|ch| ch.to_ascii_uppercase())
        })
    }

    /// Answer-key shares over retrieval candidates: for each text, the number of candidates with
    /// the same key divided by the number with any key; 0 for an unkeyed text.
    pub fn cluster_shares(&self, texts: &[&str]) -> Result<Vec<f64>, ScoreError> {
        let max = self.config.limits.candidates_max;
        if texts.len() > max {
            return Err(ScoreError::TooManyCandidates { count: texts.len(), max });
        }
        let keys: Vec<Option<char>> = texts.iter().map(|t| self.answer_key(t)).collect();
        let keyed = keys.iter().filter(|k| k.is_some()).count().max(1);
        Ok(keys
            .iter()
            .map(|k| match k {
                Some(key) => keys.iter().filter(|o| *o == &Some(*key)).count() as f64 / keyed as f64,
                None => 0.0,
            })
            .collect())
    }

    /// Write-time risk `r(m, ∅)`: no query, so no retrieval increments and `d = 0`.
    pub fn score(&self, m: &LifecycleMemory) -> Result<RiskBreakdown, ScoreError> {
        self.score_inner(m, None)
    }

    /// Retrieval-time risk `r(m, c_t)`: adds the query-overlap and query-trigger increments to
    /// `t` and the cluster dominance `d`.
    pub fn score_in_context(
        &self,
        m: &LifecycleMemory,
        ctx: &RetrievalContext<'_>,
    ) -> Result<RiskBreakdown, ScoreError> {
        self.check_query(ctx.query)?;
        if !ctx.similarity.is_finite() {
            return Err(ScoreError::NonFinite { field: "similarity" });
        }
        if !ctx.cluster_share.is_finite() {
            return Err(ScoreError::NonFinite { field: "cluster_share" });
        }
        self.score_inner(m, Some(ctx))
    }

    fn score_inner(
        &self,
        m: &LifecycleMemory,
        ctx: Option<&RetrievalContext<'_>>,
    ) -> Result<RiskBreakdown, ScoreError> {
        self.check_memory(m)?;
        // Caps and the taint floor carried from upstream always apply.
        let g = m.carried.clamp_guard(&m.guard);
        let c = &self.config.signals;
        let w = &self.config.weights;
        let text = m.text.as_str();
        let mut ev = SignalEvidence::default();

        // p: provenance.
        let source = m.source_descriptor();
        ev.route_primary = CompiledRules::any_marker(&self.rules.provenance_primary_markers, &source);
        ev.route_secondary = CompiledRules::any_marker(&self.rules.provenance_secondary_markers, &source);
        let mut p = 0.0;
        if ev.route_primary {
            p += c.provenance_route_primary;
        }
        if ev.route_secondary {
            p += c.provenance_route_secondary;
        }
        p += match g.taint {
            Taint::External => c.provenance_taint_external,
            Taint::Unverified => c.provenance_taint_unverified,
            Taint::Poisoned => c.provenance_taint_poisoned,
            Taint::Clean => 0.0,
        };
        ev.team_low_trust = m.scope == LifecycleScope::Team && g.tau < c.provenance_team_trust_below;
        if ev.team_low_trust {
            p += c.provenance_team_low_trust;
        }
        let p = clip01(p);

        // l: lineage markers, each once, in parents, source or type.
        let parents = m.parents.join(" ").to_lowercase();
        let mtype = m.memory_type.to_lowercase();
        ev.lineage_markers = self
            .rules
            .lineage_markers
            .iter()
            .filter(|mk| parents.contains(mk.as_str()) || source.contains(mk.as_str()) || mtype.contains(mk.as_str()))
            .cloned()
            .collect();
        let l = clip01(c.lineage_per_marker * ev.lineage_markers.len() as f64);

        // s: self-claims.
        ev.self_claim_matches = CompiledRules::count(&self.rules.self_claim, text);
        let mut s = c.self_claim_per_match * f64::from(ev.self_claim_matches);
        ev.self_claim_bonus =
            ev.self_claim_matches > 0 && !(g.taint == Taint::Clean && g.tau >= c.self_claim_trusted_tau_min);
        if ev.self_claim_bonus {
            s += c.self_claim_unverified_bonus;
        }
        let s = clip01(s);

        // i: instruction-likeness.
        ev.forbidden_directive = self.is_forbidden(text);
        ev.instruction_matches = CompiledRules::count(&self.rules.instruction_counted, text);
        let i = if ev.forbidden_directive {
            clip01(c.instruction_forbidden)
        } else {
            clip01(c.instruction_per_match * f64::from(ev.instruction_matches))
        };

        // b: answer binding.
        ev.answer_binding_matches = CompiledRules::count(&self.rules.answer_binding, text);
        let b = clip01(c.answer_binding_per_match * f64::from(ev.answer_binding_matches));

        // t: trigger sensitivity, plus the retrieval increments.
        let base = self.trigger_base(text);
        ev.trigger_cue = base.cue;
        ev.trigger_hash_token = base.hash_token;
        ev.trigger_long_phrase = base.long_phrase;
        let mut t = base.score;
        let mut d = 0.0;
        if let Some(ctx) = ctx {
            let overlap = self.query_overlap(ctx.query, text);
            ev.query_overlap = Some(overlap);
            ev.similarity = Some(ctx.similarity);
            ev.cluster_share = Some(ctx.cluster_share);
            if !ctx.query.trim().is_empty()
                && overlap >= c.trigger_overlap_min
                && (base.score > 0.0 || self.trigger_base(ctx.query).score > 0.0)
            {
                ev.trigger_overlap_bonus = true;
                t = clip01(t + c.trigger_overlap_bonus);
            }
            if self.rules.trigger_words.is_match(ctx.query) && ctx.similarity >= c.trigger_query_similarity_min {
                ev.trigger_query_bonus = true;
                t = clip01(t + c.trigger_query_bonus);
            }
            // d: cluster dominance.
            d = clip01((ctx.cluster_share - c.cluster_share_offset).max(0.0));
        }

        // a: agent distrust.
        ev.effective_agent_trust = self.effective_agent_trust(m.source_agent_trust);
        let a = clip01(1.0 - ev.effective_agent_trust);

        let total = clip01(
            w.provenance * p
                + w.lineage * l
                + w.self_claim * s
                + w.instruction * i
                + w.answer_binding * b
                + w.trigger * t
                + w.cluster * d
                + w.agent_distrust * a,
        );
        Ok(RiskBreakdown {
            provenance: p,
            lineage: l,
            self_claim: s,
            instruction: i,
            answer_binding: b,
            trigger: t,
            cluster: d,
            agent_distrust: a,
            total,
            evidence: ev,
        })
    }

    /// The query's own context risk (tool-output cues, forbidden directives, injection phrases,
    /// trigger cues), in `[0, 1]`. Used by the query-conditioned hazard and taint terms.
    pub fn query_context_risk(&self, query: &str) -> f64 {
        let r = &self.config.retrieval;
        let lowered = query.to_lowercase();
        let mut risk = 0.0;
        if CompiledRules::any_marker(&self.rules.query_tool_output_cues, &lowered) {
            risk += r.query_risk_tool_output;
        }
        if self.is_forbidden(query) {
            risk += r.query_risk_forbidden;
        }
        if CompiledRules::any_marker(&self.rules.query_injection_cues, &lowered) {
            risk += r.query_risk_injection;
        }
        if CompiledRules::any_marker(&self.rules.query_trigger_cues, &lowered) {
            risk += r.query_risk_trigger;
        }
        clip01(risk)
    }
}
