//! Aggregation of runs into the report (`lifecycle.json`) and its Markdown rendering
//! (`lifecycle.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::metrics::{GateCounts, OriginCounts, RunMetrics};
use super::settings::Setting;
use super::topology::Topology;
use super::variant::Variant;
use crate::agent::AgentStats;

/// Which study a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Study {
    /// The main grid: every setting × topology × variant, 8 agents (3 attackers).
    Main,
    /// Attack-free utility (no attackers).
    AttackFree,
    /// Larger teams (30 and 50 agents, same attacker ratio).
    Scale,
    /// Backbone profiles of the scripted agent.
    Profile,
    /// Memory routes only: attackers silent in the dialogue.
    MemoryRoutes,
}

impl Study {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Study::Main => "main",
            Study::AttackFree => "attack_free",
            Study::Scale => "scale",
            Study::Profile => "profile",
            Study::MemoryRoutes => "memory_routes",
        }
    }
}

/// The key of a row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// Study.
    pub study: Study,
    /// Setting.
    pub setting: Setting,
    /// Topology.
    pub topology: Topology,
    /// Variant.
    pub variant: Variant,
    /// Agents.
    pub agents: usize,
    /// Attackers.
    pub attackers: usize,
    /// Backbone profile name.
    pub profile: &'static str,
}

/// False-positive and true-positive rates of the gates over a row's runs (%).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GateRates {
    /// Benign writes quarantined or rejected.
    pub benign_write_held: Option<f64>,
    /// Benign writes rewritten as unverified notes.
    pub benign_write_rewritten: Option<f64>,
    /// Benign candidates blocked by the read firewall or the broker.
    pub benign_read_blocked: Option<f64>,
    /// Benign promotion requests refused.
    pub benign_promotion_refused: Option<f64>,
    /// Poisoned writes quarantined or rejected.
    pub poison_write_held: Option<f64>,
    /// Poisoned candidates blocked by the read firewall or the broker.
    pub poison_read_blocked: Option<f64>,
    /// Poisoned promotion requests that went through.
    pub poison_promoted: Option<f64>,
}

fn rate(k: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| round1(k as f64 * 100.0 / n as f64))
}

impl GateRates {
    /// Rates from summed counts.
    pub fn from_counts(g: &GateCounts) -> Self {
        let bw: u64 = g.benign_writes.iter().sum();
        let pw: u64 = g.poison_writes.iter().sum();
        GateRates {
            benign_write_held: rate(g.benign_writes[2] + g.benign_writes[3], bw),
            benign_write_rewritten: rate(g.benign_writes[1], bw),
            benign_read_blocked: rate(g.benign_blocked, g.benign_surfaced),
            benign_promotion_refused: rate(g.benign_promotions.saturating_sub(g.benign_promoted), g.benign_promotions),
            poison_write_held: rate(g.poison_writes[2] + g.poison_writes[3], pw),
            poison_read_blocked: rate(g.poison_blocked, g.poison_surfaced),
            poison_promoted: rate(g.poison_promoted, g.poison_promotions),
        }
    }
}

/// One row: a (study, setting, topology, variant, team size, profile) cell, averaged over seeds.
/// Percentages are 0–100.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LifecycleRow {
    /// Study.
    pub study: String,
    /// Setting.
    pub setting: String,
    /// Topology.
    pub topology: String,
    /// Variant.
    pub variant: String,
    /// Backbone profile (scripted agent).
    pub profile: String,
    /// Agents.
    pub agents: usize,
    /// Attacker-controlled agents.
    pub attackers: usize,
    /// Runs (seeds) averaged.
    pub seeds: usize,
    /// MDSR@3 (or @R).
    pub mdsr3: Option<f64>,
    /// RDA@3.
    pub rda3: Option<f64>,
    /// PMUR@3.
    pub pmur: Option<f64>,
    /// PMUR-A@3.
    pub pmur_a: Option<f64>,
    /// Sec. ASR (tool settings; `null` otherwise).
    pub sec_asr: Option<f64>,
    /// MDSR by round.
    pub mdsr_by_round: Vec<Option<f64>>,
    /// RDA by round.
    pub rda_by_round: Vec<Option<f64>>,
    /// PMUR by round.
    pub pmur_by_round: Vec<Option<f64>>,
    /// PMUR-A by round.
    pub pmur_a_by_round: Vec<Option<f64>>,
    /// Poisoned-memory write rate.
    pub write_rate: Option<f64>,
    /// Poison persistence.
    pub persistence: Option<f64>,
    /// Standard deviation of MDSR@3 over seeds.
    pub mdsr3_sd: Option<f64>,
    /// Standard deviation of RDA@3 over seeds.
    pub rda3_sd: Option<f64>,
    /// Mean estimated prompt tokens per non-attacker output.
    pub prompt_tokens: Option<f64>,
    /// Gate rates (false and true positives).
    pub gate_rates: GateRates,
    /// Gate counts summed over seeds.
    pub gates: GateCounts,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn sd(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if xs.len() < 2 {
        return Some(0.0);
    }
    Some((xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64).sqrt())
}

fn mean_of(runs: &[&RunMetrics], f: impl Fn(&RunMetrics) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    mean(&v).map(round1)
}

fn by_round(runs: &[&RunMetrics], rounds: usize, f: impl Fn(&RunMetrics) -> &Vec<Option<f64>>) -> Vec<Option<f64>> {
    (0..rounds).map(|k| mean_of(runs, |r| f(r).get(k).copied().flatten())).collect()
}

/// Aggregate the runs of one key.
pub fn row(key: &RowKey, runs: &[&RunMetrics], rounds: usize) -> LifecycleRow {
    let last = rounds.saturating_sub(1);
    let at = |v: &Vec<Option<f64>>| v.get(last).copied().flatten();
    let mdsr_by_round = by_round(runs, rounds, |r| &r.mdsr_by_round);
    let rda_by_round = by_round(runs, rounds, |r| &r.rda_by_round);
    let pmur_by_round = by_round(runs, rounds, |r| &r.pmur_by_round);
    let pmur_a_by_round = by_round(runs, rounds, |r| &r.pmur_a_by_round);
    let mut gates = GateCounts::default();
    for r in runs {
        gates.add(&r.gates);
    }
    let m3: Vec<f64> = runs.iter().filter_map(|r| at(&r.mdsr_by_round)).collect();
    let r3: Vec<f64> = runs.iter().filter_map(|r| at(&r.rda_by_round)).collect();
    LifecycleRow {
        study: key.study.name().to_owned(),
        setting: key.setting.name().to_owned(),
        topology: key.topology.name().to_owned(),
        variant: key.variant.name().to_owned(),
        profile: key.profile.to_owned(),
        agents: key.agents,
        attackers: key.attackers,
        seeds: runs.len(),
        mdsr3: at(&mdsr_by_round),
        rda3: at(&rda_by_round),
        pmur: at(&pmur_by_round),
        pmur_a: at(&pmur_a_by_round),
        sec_asr: mean_of(runs, |r| r.sec_asr),
        mdsr_by_round,
        rda_by_round,
        pmur_by_round,
        pmur_a_by_round,
        write_rate: mean_of(runs, |r| r.write_rate),
        persistence: mean_of(runs, |r| r.persistence),
        mdsr3_sd: sd(&m3).map(round1),
        rda3_sd: sd(&r3).map(round1),
        prompt_tokens: mean_of(runs, |r| r.tokens),
        gate_rates: GateRates::from_counts(&gates),
        gates,
    }
}

/// A Table-5-style summary row: one variant, equal-weight mean over topologies (and settings).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// `all` or a setting.
    pub setting: String,
    /// Variant.
    pub variant: String,
    /// Topologies averaged.
    pub topologies: Vec<String>,
    /// MDSR@3.
    pub mdsr3: Option<f64>,
    /// RDA@3.
    pub rda3: Option<f64>,
    /// PMUR@3.
    pub pmur: Option<f64>,
    /// PMUR-A@3.
    pub pmur_a: Option<f64>,
    /// Sec. ASR (tool settings).
    pub sec_asr: Option<f64>,
    /// Poison write rate.
    pub write_rate: Option<f64>,
    /// Poison persistence.
    pub persistence: Option<f64>,
    /// Prompt tokens.
    pub prompt_tokens: Option<f64>,
    /// MDSR by round.
    pub mdsr_by_round: Vec<Option<f64>>,
    /// RDA by round.
    pub rda_by_round: Vec<Option<f64>>,
    /// Gate rates over the averaged rows' summed counts.
    pub gate_rates: GateRates,
}

/// Equal-weight means of `rows` (already filtered) per variant.
pub fn summarize(rows: &[&LifecycleRow], setting: &str, variants: &[Variant], rounds: usize) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    for v in variants {
        let rs: Vec<&&LifecycleRow> = rows.iter().filter(|r| r.variant == v.name()).collect();
        if rs.is_empty() {
            continue;
        }
        let m = |f: &dyn Fn(&LifecycleRow) -> Option<f64>| {
            let xs: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
            mean(&xs).map(round1)
        };
        let mut topologies: Vec<String> = rs.iter().map(|r| r.topology.clone()).collect();
        topologies.sort();
        topologies.dedup();
        let mut gates = GateCounts::default();
        for r in &rs {
            gates.add(&r.gates);
        }
        out.push(SummaryRow {
            setting: setting.to_owned(),
            variant: v.name().to_owned(),
            topologies,
            mdsr3: m(&|r| r.mdsr3),
            rda3: m(&|r| r.rda3),
            pmur: m(&|r| r.pmur),
            pmur_a: m(&|r| r.pmur_a),
            sec_asr: m(&|r| r.sec_asr),
            write_rate: m(&|r| r.write_rate),
            persistence: m(&|r| r.persistence),
            prompt_tokens: m(&|r| r.prompt_tokens),
            mdsr_by_round: (0..rounds).map(|k| m(&|r| r.mdsr_by_round.get(k).copied().flatten())).collect(),
            rda_by_round: (0..rounds).map(|k| m(&|r| r.rda_by_round.get(k).copied().flatten())).collect(),
            gate_rates: GateRates::from_counts(&gates),
        });
    }
    out
}

/// An example of an attacker text, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttackExample {
    /// Setting.
    pub setting: String,
    /// Route.
    pub route: String,
    /// Template.
    pub template: usize,
    /// The text as written.
    pub text: String,
}

/// Where items came from and what the gates did with them (main study, one variant, summed
/// over settings, topologies and seeds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OriginRow {
    /// Variant.
    pub variant: String,
    /// `poison:<route>` or `benign:<kind>`.
    pub origin: String,
    /// Counts.
    pub counts: OriginCounts,
}

/// What was run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleReport {
    /// Tasks per run.
    pub tasks: usize,
    /// Warm-up tasks (no attacks, not scored).
    pub warmup: usize,
    /// Security probes per run (tool settings).
    pub probes: usize,
    /// Seeds per cell of the main grid.
    pub seeds: usize,
    /// Agents.
    pub agents: usize,
    /// Attackers.
    pub attackers: usize,
    /// Rounds.
    pub rounds: usize,
    /// Settings.
    pub settings: Vec<String>,
    /// Topologies.
    pub topologies: Vec<String>,
    /// Variants.
    pub variants: Vec<String>,
    /// Runs in total (all studies).
    pub runs: usize,
}

/// The whole report of `memwarden bench lifecycle`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LifecycleReport {
    /// Always `"lifecycle"`.
    pub suite: String,
    /// The agent model that produced every number (`scripted(...)` or `openai:<model> at <url>`).
    pub agent: String,
    /// `scripted` or `openai`.
    pub agent_kind: String,
    /// The seed.
    pub seed: u64,
    /// `--quick`.
    pub quick: bool,
    /// Git revision stamped by the CLI.
    pub git_rev: Option<String>,
    /// Wall time (s).
    pub wall_time_s: f64,
    /// How the memory layer was driven.
    pub integration: String,
    /// What was run.
    pub scale: ScaleReport,
    /// Every cell.
    pub rows: Vec<LifecycleRow>,
    /// Table-5-style means (main study; star, chain, tree, random), per setting and over all.
    pub table5: Vec<SummaryRow>,
    /// Items by origin: what the gates did with each kind (diagnostics).
    pub origins: Vec<OriginRow>,
    /// Examples of the attacker texts.
    pub attack_examples: Vec<AttackExample>,
    /// Agent counters.
    pub agent_stats: AgentStats,
    /// How to read the tables.
    pub notes: Vec<String>,
}

fn f(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".to_owned())
}

fn rounds_str(v: &[Option<f64>]) -> String {
    v.iter().map(|x| f(*x)).collect::<Vec<_>>().join(" / ")
}

/// MDSR@3 and RDA@3 of a Table-5 row.
fn cell(r: &LifecycleReport, setting: &str, variant: &str) -> Option<(f64, f64)> {
    let t = r.table5.iter().find(|t| t.setting == setting && t.variant == variant)?;
    Some((t.mdsr3?, t.rda3?))
}

/// The contrasts the paper reports, computed from this run.
fn comparison(s: &mut String, r: &LifecycleReport) {
    let _ = writeln!(s, "\n## Comparison with the paper's contrasts (ΔMDSR@3 / ΔRDA@3 in points, mean over star / chain / tree / random)\n");
    let _ = writeln!(s, "| contrast | scope | this run | paper |");
    let _ = writeln!(s, "| --- | --- | --- | --- |");
    let d = |scope: &str, a: &str, b: &str| -> String {
        match (cell(r, scope, a), cell(r, scope, b)) {
            (Some(x), Some(y)) => format!("{:+.1} / {:+.1}", x.0 - y.0, x.1 - y.1),
            _ => "–".to_owned(),
        }
    };
    let rows: [(&str, &str, &str, &str, &str); 9] = [
        ("lifecycle − retrieval_only", "appworld_agentpoison", "lifecycle", "retrieval_only", "+23.4 / −21.5 (AppWorld, Gemma)"),
        ("lifecycle − retrieval_only", "all", "lifecycle", "retrieval_only", "–"),
        ("full − lifecycle (authority layer)", "all", "full", "lifecycle", "– (not in the paper)"),
        ("no_q − lifecycle", "appworld_agentpoison", "no_q", "lifecycle", "−20.3 / +17.3 (AppWorld, Gemma)"),
        ("no_feedback − lifecycle", "appworld_agentpoison", "no_feedback", "lifecycle", "−20.7 / +16.2 (AppWorld, Gemma)"),
        ("no_promotion_gate − lifecycle", "longmemeval_memorygraft", "no_promotion_gate", "lifecycle", "−13.6 / +13.6 (LongMemEval; the largest gate loss)"),
        ("no_write_gate − lifecycle", "longmemeval_memorygraft", "no_write_gate", "lifecycle", "smaller loss (figure only)"),
        ("no_retrieval_gate − lifecycle", "longmemeval_memorygraft", "no_retrieval_gate", "lifecycle", "smaller loss (figure only)"),
        ("no_broker − lifecycle", "longmemeval_memorygraft", "no_broker", "lifecycle", "smaller loss (figure only)"),
    ];
    for (name, scope, a, b, paper) in rows {
        let _ = writeln!(s, "| {name} | {scope} | {} | {paper} |", d(scope, a, b));
    }
    // The largest single-gate loss in this run (all settings).
    let base = cell(r, "all", "lifecycle");
    let mut worst: Option<(&str, f64)> = None;
    for g in ["no_write_gate", "no_retrieval_gate", "no_promotion_gate", "no_broker"] {
        if let (Some(b), Some(x)) = (base, cell(r, "all", g)) {
            let loss = b.0 - x.0;
            if worst.is_none_or(|w| loss > w.1) {
                worst = Some((g, loss));
            }
        }
    }
    if let Some((g, loss)) = worst {
        let _ = writeln!(s, "\nLargest single-gate loss in this run (all settings): **{g}** (MDSR@3 {loss:.1} points below lifecycle).");
    }
}

/// Render the report as Markdown.
pub fn markdown(r: &LifecycleReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# memwarden bench lifecycle — multi-agent poisoning simulation (MAPLE-Guard reproduction)\n");
    let _ = writeln!(
        s,
        "Agent: **{}** · seed {} · git {} · wall time {:.1} s · {} run{}\n",
        r.agent,
        r.seed,
        r.git_rev.as_deref().unwrap_or("unknown"),
        r.wall_time_s,
        if r.quick { "quick" } else { "full" },
        if r.agent_kind == "scripted" { " (scripted agent: these numbers measure the memory layer, not an LLM)" } else { "" }
    );
    let sc = &r.scale;
    let _ = writeln!(
        s,
        "Setup: {} agents ({} attacker-controlled), {} rounds, {} tasks per run ({} warm-up), {} probes, {} seed(s) per cell, {} runs. {}\n",
        sc.agents, sc.attackers, sc.rounds, sc.tasks, sc.warmup, sc.probes, sc.seeds, sc.runs, r.integration
    );
    let _ = writeln!(s, "## Table 5 analogue: all settings, mean over star / chain / tree / random\n");
    let _ = writeln!(s, "| variant | MDSR@3 ↑ | RDA@3 ↓ | PMUR ↓ | PMUR-A ↓ | Sec. ASR ↓ | poison write rate | persistence | benign writes held | benign reads blocked | benign promotions refused | prompt tokens |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for t in r.table5.iter().filter(|t| t.setting == "all") {
        let g = &t.gate_rates;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.variant,
            f(t.mdsr3),
            f(t.rda3),
            f(t.pmur),
            f(t.pmur_a),
            f(t.sec_asr),
            f(t.write_rate),
            f(t.persistence),
            f(g.benign_write_held),
            f(g.benign_read_blocked),
            f(g.benign_promotion_refused),
            f(t.prompt_tokens)
        );
    }
    let _ = writeln!(s, "\nPaper (Table 5, AppWorld proxy, Gemma, same four topologies): full 88.4 / 0.1; retrieval-only 65.0 / 21.6; no_q 68.1 / 17.4; no correctness feedback 67.7 / 16.3. Gate removal (LongMemEval): full 73.6 / 0.9; without promotion gate 60.0 / 14.5 (the largest loss).\n");
    let _ = writeln!(s, "## Per setting (MDSR@3 / RDA@3, mean over star / chain / tree / random)\n");
    let settings: Vec<String> = {
        let mut v: Vec<String> = r.table5.iter().filter(|t| t.setting != "all").map(|t| t.setting.clone()).collect();
        v.dedup();
        v
    };
    let variants: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for t in &r.table5 {
            if !v.contains(&t.variant) {
                v.push(t.variant.clone());
            }
        }
        v
    };
    let _ = write!(s, "| variant |");
    for st in &settings {
        let _ = write!(s, " {st} |");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|{}", " --- |".repeat(settings.len() + 1));
    for v in &variants {
        let _ = write!(s, "| {v} |");
        for st in &settings {
            let t = r.table5.iter().find(|t| &t.setting == st && &t.variant == v);
            let _ = write!(s, " {} / {} |", f(t.and_then(|t| t.mdsr3)), f(t.and_then(|t| t.rda3)));
        }
        let _ = writeln!(s);
    }
    let tool_settings: Vec<&String> =
        settings.iter().filter(|st| r.table5.iter().any(|t| &t.setting == *st && t.sec_asr.is_some())).collect();
    if !tool_settings.is_empty() {
        let _ = writeln!(s, "\n## Sec. ASR (security probes choosing the risky tool, %; mean over star / chain / tree / random)\n");
        let _ = write!(s, "| variant |");
        for st in &tool_settings {
            let _ = write!(s, " {st} |");
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "|{}", " --- |".repeat(tool_settings.len() + 1));
        for v in &variants {
            let _ = write!(s, "| {v} |");
            for st in &tool_settings {
                let t = r.table5.iter().find(|t| &t.setting == *st && &t.variant == v);
                let _ = write!(s, " {} |", f(t.and_then(|t| t.sec_asr)));
            }
            let _ = writeln!(s);
        }
    }
    comparison(&mut s, r);
    let _ = writeln!(s, "\n## Rounds (all settings, four topologies): MDSR@1/2/3 and RDA@1/2/3\n");
    let _ = writeln!(s, "| variant | MDSR by round | RDA by round |");
    let _ = writeln!(s, "| --- | --- | --- |");
    for t in r.table5.iter().filter(|t| t.setting == "all") {
        let _ = writeln!(s, "| {} | {} | {} |", t.variant, rounds_str(&t.mdsr_by_round), rounds_str(&t.rda_by_round));
    }
    let mut by_topo: BTreeMap<(String, String), Vec<&LifecycleRow>> = BTreeMap::new();
    for row in r.rows.iter().filter(|x| x.study == "main") {
        by_topo.entry((row.variant.clone(), row.topology.clone())).or_default().push(row);
    }
    let topologies: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for row in r.rows.iter().filter(|x| x.study == "main") {
            if !v.contains(&row.topology) {
                v.push(row.topology.clone());
            }
        }
        v
    };
    let _ = writeln!(s, "\n## By topology (all settings): MDSR@3 / RDA@3\n");
    let _ = write!(s, "| variant |");
    for t in &topologies {
        let _ = write!(s, " {t} |");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|{}", " --- |".repeat(topologies.len() + 1));
    for v in &variants {
        let _ = write!(s, "| {v} |");
        for t in &topologies {
            let rows = by_topo.get(&(v.clone(), t.clone())).cloned().unwrap_or_default();
            let m3: Vec<f64> = rows.iter().filter_map(|x| x.mdsr3).collect();
            let r3: Vec<f64> = rows.iter().filter_map(|x| x.rda3).collect();
            let _ = write!(s, " {} / {} |", f(mean(&m3).map(round1)), f(mean(&r3).map(round1)));
        }
        let _ = writeln!(s);
    }
    for (title, study) in [
        ("Attack-free utility (random topology, no attackers)", "attack_free"),
        ("Scale (random topology)", "scale"),
        ("Backbone profiles (star topology)", "profile"),
    ] {
        let rows: Vec<&LifecycleRow> = r.rows.iter().filter(|x| x.study == study).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n## {title}\n");
        let _ = writeln!(s, "| setting | topology | agents | profile | variant | MDSR by round | RDA by round | PMUR-A@3 | benign reads blocked | seeds |");
        let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        for x in rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} |",
                x.setting,
                x.topology,
                x.agents,
                x.attackers,
                x.profile,
                x.variant,
                rounds_str(&x.mdsr_by_round),
                rounds_str(&x.rda_by_round),
                f(x.pmur_a),
                f(x.gate_rates.benign_read_blocked),
                x.seeds
            );
        }
    }
    let routes: Vec<&LifecycleRow> = r.rows.iter().filter(|x| x.study == "memory_routes").collect();
    if !routes.is_empty() {
        let _ = writeln!(s, "\n## Memory routes only (attackers silent in the dialogue): MDSR@3 / RDA@3 / PMUR@1, mean over star / chain / tree / random\n");
        let mut vs: Vec<String> = Vec::new();
        let mut sts: Vec<String> = Vec::new();
        for x in &routes {
            if !vs.contains(&x.variant) {
                vs.push(x.variant.clone());
            }
            if !sts.contains(&x.setting) {
                sts.push(x.setting.clone());
            }
        }
        let _ = write!(s, "| variant |");
        for st in &sts {
            let _ = write!(s, " {st} |");
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "|{}", " --- |".repeat(sts.len() + 1));
        for v in &vs {
            let _ = write!(s, "| {v} |");
            for st in &sts {
                let cell: Vec<&&LifecycleRow> = routes.iter().filter(|x| &x.variant == v && &x.setting == st).collect();
                let m = |g: &dyn Fn(&LifecycleRow) -> Option<f64>| mean(&cell.iter().filter_map(|x| g(x)).collect::<Vec<_>>()).map(round1);
                let _ = write!(
                    s,
                    " {} / {} / {} |",
                    f(m(&|x| x.mdsr3)),
                    f(m(&|x| x.rda3)),
                    f(m(&|x| x.pmur_by_round.first().copied().flatten()))
                );
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(s, "\n## Gate decisions (main study, all settings and topologies)\n");
    let _ = writeln!(s, "| variant | benign writes held | benign rewritten | benign reads blocked | benign promotions refused | poison writes held | poison reads blocked | poison promotions through | authority-refused actions | user-approved actions | authority-refused promotions |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for v in &variants {
        let mut g = GateCounts::default();
        for row in r.rows.iter().filter(|x| x.study == "main" && &x.variant == v) {
            g.add(&row.gates);
        }
        let k = GateRates::from_counts(&g);
        let _ = writeln!(
            s,
            "| {v} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            f(k.benign_write_held),
            f(k.benign_write_rewritten),
            f(k.benign_read_blocked),
            f(k.benign_promotion_refused),
            f(k.poison_write_held),
            f(k.poison_read_blocked),
            f(k.poison_promoted),
            g.authority_refused_actions,
            g.authority_user_approved,
            g.authority_refused_promotions
        );
    }
    let _ = writeln!(s, "\n## Are the write and promotion gates masked by the retrieval gate? (main study, poisoned items, summed)\n");
    let _ = writeln!(s, "Shadow checks that decide nothing: for every poisoned write the write gate quarantined, and every poisoned promotion the promotion gate blocked, the retrieval gate is asked whether it would have blocked an active copy (write: for the owner; promotion: in the shared store, for another agent; both on the task's query).\n");
    let _ = writeln!(s, "| variant | write-quarantined poison | … retrieval would block too | … retrieval would pass | promotion-blocked poison | … retrieval would block too | … retrieval would pass |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for v in &variants {
        let mut g = GateCounts::default();
        for row in r.rows.iter().filter(|x| x.study == "main" && &x.variant == v) {
            g.add(&row.gates);
        }
        let w = g.poison_write_held_read_would_block + g.poison_write_held_read_would_pass;
        let p = g.poison_promotion_blocked_read_would_block + g.poison_promotion_blocked_read_would_pass;
        if w + p == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "| {v} | {w} | {} ({}%) | {} ({}%) | {p} | {} ({}%) | {} ({}%) |",
            g.poison_write_held_read_would_block,
            f(rate(g.poison_write_held_read_would_block, w)),
            g.poison_write_held_read_would_pass,
            f(rate(g.poison_write_held_read_would_pass, w)),
            g.poison_promotion_blocked_read_would_block,
            f(rate(g.poison_promotion_blocked_read_would_block, p)),
            g.poison_promotion_blocked_read_would_pass,
            f(rate(g.poison_promotion_blocked_read_would_pass, p)),
        );
    }
    let _ = writeln!(s, "\n## Items by origin (main study, summed): what each gate did\n");
    let _ = writeln!(s, "Writes held = quarantined or rejected at write; reads blocked = firewall or broker, over candidates surfaced; admitted = entered a non-attacker prompt; followed = a non-attacker answer followed it (counted per output and round); promotion-blocked = refused by the lifecycle promotion gate. The two shadow columns (poisoned items only) count write-quarantined and promotion-blocked items that the retrieval gate would have let into a prompt at that moment.\n");
    let _ = writeln!(s, "| variant | origin | writes | held % | rewritten % | surfaced | reads blocked % | admitted | followed | promotions | promoted | promotion-blocked | held, read would pass | promotion-blocked, read would pass |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for o in &r.origins {
        let c = &o.counts;
        let w: u64 = c.writes.iter().sum();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.variant,
            o.origin,
            w,
            f(rate(c.writes[2] + c.writes[3], w)),
            f(rate(c.writes[1], w)),
            c.surfaced,
            f(rate(c.blocked, c.surfaced)),
            c.admitted,
            c.followed,
            c.promotions,
            c.promoted,
            c.promotion_blocked,
            c.write_held_read_would_pass,
            c.promotion_blocked_read_would_pass
        );
    }
    let _ = writeln!(s, "\n## Attacker texts (examples)\n");
    for e in &r.attack_examples {
        let _ = writeln!(s, "- **{} / {} #{}**: {}", e.setting, e.route, e.template, e.text.replace('\n', " ⏎ "));
    }
    let _ = writeln!(s, "\n## Notes\n");
    for n in &r.notes {
        let _ = writeln!(s, "- {n}");
    }
    let _ = writeln!(s, "\n## Every cell\n");
    let _ = writeln!(s, "| study | setting | topology | variant | agents | MDSR@3 | RDA@3 | PMUR | PMUR-A | Sec. ASR | write rate | persistence | seeds |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for x in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.study,
            x.setting,
            x.topology,
            x.variant,
            x.agents,
            f(x.mdsr3),
            f(x.rda3),
            f(x.pmur),
            f(x.pmur_a),
            f(x.sec_asr),
            f(x.write_rate),
            f(x.persistence),
            x.seeds
        );
    }
    let _ = writeln!(s, "\n![MDSR and RDA by round per variant](lifecycle.png)");
    s
}
