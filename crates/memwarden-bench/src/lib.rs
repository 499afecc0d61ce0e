//! memwarden's benchmark suites. The first is **MEM-INV-Bench**, the authority-layer benchmark
//! behind `memwarden bench authority`: attacks planted in one session through the real engine
//! and store and acted on N sessions later, laundered through self-summaries, trusted-tool echoes
//! and fabricated corroboration, decided by seven defenses and three ablations, with Wilson
//! intervals, permutation tests, a persistence table, a corroboration study, a content-detector
//! threshold sweep and the gate's latency. The lineage benchmark ([`lineage`]), the multi-agent
//! poisoning simulation of the lifecycle layer ([`lifecycle`], `memwarden bench lifecycle`) and
//! the HTTP load benchmark ([`load`]) live beside it.
//!
//! Every memwarden decision is `Engine::decide` on a real `SqliteStore`; every baseline decides
//! on the items read back from that store. Agents are pluggable ([`agent::Agent`]): the default
//! [`agent::ScriptedAgent`] is deterministic and maximally persuadable; [`openai::OpenAiAgent`]
//! drives any OpenAI-compatible chat endpoint. Each table names the agent that produced it.
//!
//! ```no_run
//! use memwarden_bench::{AuthorityBenchOptions, run_authority, write_authority};
//!
//! let mut opts = AuthorityBenchOptions::new("/tmp/mwbench");
//! opts.quick = true;
//! opts.git_rev = Some("abc1234".into());
//! let report = run_authority(&opts, &mut |done, total| eprint!("\r{done}/{total}"))?;
//! let (json, md) = write_authority(&report, &opts.out)?;
//! let authority = report.rows.iter().find(|r| r.defense == "authority").expect("row");
//! println!("authority ASR {}%, legit {}% -> {} {}", authority.asr, authority.legit_utility, json.display(), md.display());
//! # Ok::<(), memwarden_bench::BenchError>(())
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod agent;
pub mod authority;
pub mod lifecycle;
pub mod lineage;
pub mod load;
pub mod locomo;
pub mod openai;
pub mod retrieval;
pub mod stats;

pub use authority::{AgentChoice, AuthorityBenchOptions, AuthorityReport, Scale, full_decide, run_authority, write_authority};

/// Refuse a configuration that is not the shipped `full` preset (every `full` row runs it, and
/// the default configuration must be it too).
pub(crate) fn assert_full_preset(c: &memwarden_engine::EngineConfig) -> Result<(), BenchError> {
    let default = memwarden_engine::EngineConfig::default();
    if c.preset() != Some(memwarden_engine::Preset::Full) || default.preset() != Some(memwarden_engine::Preset::Full) || c.lineage.is_none() || c.lifecycle.is_none() {
        return Err(BenchError::Invalid("the full preset must run the authority, lineage and lifecycle layers and be the default".into()));
    }
    Ok(())
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The engine refused an operation the harness needed.
    #[error("engine: {0}")]
    Engine(#[from] memwarden_engine::EngineError),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] memwarden_store::StoreError),
    /// A file could not be written.
    #[error("{0}")]
    Io(String),
    /// The agent could not be set up.
    #[error("agent: {0}")]
    Agent(String),
    /// Bad options.
    #[error("invalid: {0}")]
    Invalid(String),
}
