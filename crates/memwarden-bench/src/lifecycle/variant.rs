//! The defenses compared: which gates are on, how outcome feedback flows, and whether the
//! authority layer (memwarden-core's gate) is composed.

use serde::Serialize;

/// One memory-layer configuration of the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// No defense: every write lands, retrieval is plain similarity + utility ranking, every
    /// eligible promotion goes through. The memory backend still learns `q` from outcomes.
    None,
    /// The same scorer, state derivation and feedback as `lifecycle`, enforced at retrieval only.
    RetrievalOnly,
    /// All four lifecycle gates (write, retrieval, promotion, cross-agent broker).
    Lifecycle,
    /// `lifecycle` plus memwarden-core's authority gate: labels bound from the authenticated
    /// writer and its session, promotions within the ancestry, Algorithm 1 on consequential tool
    /// choices (the lineage layer is not composed).
    Full,
    /// `lifecycle` without the write gate.
    NoWriteGate,
    /// `lifecycle` without the retrieval gate.
    NoRetrievalGate,
    /// `lifecycle` without the promotion gate.
    NoPromotionGate,
    /// `lifecycle` without the cross-agent broker.
    NoBroker,
    /// `lifecycle` with frozen utility (`q`) updates; trust / hazard / reputation still learn.
    NoQ,
    /// `lifecycle` without reference-correctness feedback: no outcome updates, new experiences
    /// are unverified observations, promotion eligibility is answer agreement.
    NoFeedback,
    /// Diagnostic: `lifecycle` whose outcome feedback leaves source-agent reputation alone
    /// (items' `q`, trust and hazard still learn).
    NoReputation,
}

/// What a variant switches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GateSet {
    /// Write gate (reject / quarantine / rewrite / allow).
    pub write: bool,
    /// Retrieval gate (score `S`, read firewall, top-n).
    pub retrieval: bool,
    /// Promotion gate (`B_p`).
    pub promotion: bool,
    /// Cross-agent broker (scope / status checks, carried restrictions).
    pub broker: bool,
    /// Guard-state derivation and risk scoring at all (off only for `none`).
    pub scored: bool,
    /// The authority layer (memwarden-core's gate).
    pub authority: bool,
}

/// How outcome feedback flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackMode {
    /// Evaluator outcomes update `q`, trust, hazard, counts and reputation; experiences record
    /// the verdict; experience promotion needs evaluated success.
    Full,
    /// As `Full` but `q` is frozen.
    NoQ,
    /// As `Full` but source-agent reputation never moves.
    NoReputation,
    /// No reference-correctness feedback at all.
    Off,
}

impl Variant {
    /// Every variant, in report order.
    pub const ALL: [Variant; 11] = [
        Variant::None,
        Variant::RetrievalOnly,
        Variant::Lifecycle,
        Variant::Full,
        Variant::NoWriteGate,
        Variant::NoRetrievalGate,
        Variant::NoPromotionGate,
        Variant::NoBroker,
        Variant::NoQ,
        Variant::NoFeedback,
        Variant::NoReputation,
    ];

    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::None => "none",
            Variant::RetrievalOnly => "retrieval_only",
            Variant::Lifecycle => "lifecycle",
            Variant::Full => "full",
            Variant::NoWriteGate => "no_write_gate",
            Variant::NoRetrievalGate => "no_retrieval_gate",
            Variant::NoPromotionGate => "no_promotion_gate",
            Variant::NoBroker => "no_broker",
            Variant::NoQ => "no_q",
            Variant::NoFeedback => "no_feedback",
            Variant::NoReputation => "no_reputation",
        }
    }

    /// Parse a name.
    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The gates this variant runs.
    pub fn gates(self) -> GateSet {
        let all = GateSet { write: true, retrieval: true, promotion: true, broker: true, scored: true, authority: false };
        match self {
            Variant::None => GateSet { write: false, retrieval: false, promotion: false, broker: false, scored: false, authority: false },
            Variant::RetrievalOnly => GateSet { write: false, retrieval: true, promotion: false, broker: false, scored: true, authority: false },
            Variant::Lifecycle | Variant::NoQ | Variant::NoFeedback | Variant::NoReputation => all,
            Variant::Full => GateSet { authority: true, ..all },
            Variant::NoWriteGate => GateSet { write: false, ..all },
            Variant::NoRetrievalGate => GateSet { retrieval: false, ..all },
            Variant::NoPromotionGate => GateSet { promotion: false, ..all },
            Variant::NoBroker => GateSet { broker: false, ..all },
        }
    }

    /// How outcome feedback flows under this variant.
    pub fn feedback(self) -> FeedbackMode {
        match self {
            Variant::NoQ => FeedbackMode::NoQ,
            Variant::NoFeedback => FeedbackMode::Off,
            Variant::NoReputation => FeedbackMode::NoReputation,
            _ => FeedbackMode::Full,
        }
    }
}
