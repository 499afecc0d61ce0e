//! The LoCoMo report: aggregation of the engine runs into tables, Markdown, JSON and the figure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use memwarden_core::action::Decision;
use memwarden_engine::Preset;
use serde::Serialize;

use super::attack::{Attack, AttackConfig, PoisonKind};
use super::data::{Conversation, Speaker};
use super::metrics::{CUTOFFS, Proportion, Ranked, RetrievalMetrics};
use super::{PayOutcome, RunResult, SearchMode, WriteCounts, WriterRole};
use crate::BenchError;
use crate::stats::percentile;

/// What the run was (stamped on every table).
#[derive(Debug, Clone, Serialize)]
pub struct RunMeta {
    /// One conversation.
    pub quick: bool,
    /// Where the data was read from.
    pub data_dir: String,
    /// The embedding model.
    pub embedder: String,
    /// Search mode.
    pub search: SearchMode,
    /// Presets, in run order.
    pub presets: Vec<Preset>,
    /// The attack (None: benign only).
    pub attack: Option<AttackConfig>,
    /// Git revision.
    pub git_rev: Option<String>,
    /// When the run started (UTC).
    pub date_utc: String,
    /// Load average when the run started.
    pub load_start: String,
    /// Distinct texts the model embedded while warming the cache.
    pub texts_embedded: u64,
    /// Time warming the cache (ms).
    pub embed_ms: u64,
    /// Texts the model embedded after warming (rewritten texts the engine produced).
    pub model_calls_after_warm: u64,
    /// Wall time of the whole run (s).
    pub wall_time_s: f64,
}

/// The machine.
#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    /// CPU model.
    pub cpu_model: String,
    /// Logical cores.
    pub cores_count: usize,
    /// Memory.
    pub memory_total_bytes: u64,
    /// Load average at the start.
    pub load_average_start: String,
    /// Load average at the end.
    pub load_average_end: String,
}

/// A conversation as used.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationInfo {
    /// Id (file stem).
    pub id: String,
    /// `speaker_a`, stored as the user.
    pub user: String,
    /// `speaker_b`, stored as a source.
    pub source: String,
    /// Sessions.
    pub sessions: usize,
    /// Turns.
    pub turns: usize,
    /// Questions per category (1..=5).
    pub questions_by_category: BTreeMap<u8, usize>,
    /// Questions (categories 1-4) left with no evidence turn after normalisation (not scored).
    pub unscored_no_evidence: usize,
    /// Evidence ids that name no turn (dropped).
    pub evidence_ids_dropped: Vec<String>,
    /// Injected turns per kind (`legit_control` for the user's own payees).
    pub injected: BTreeMap<String, usize>,
}

/// Turn-level recall for one writer role.
#[derive(Debug, Clone, Serialize)]
pub struct RoleRecall {
    /// `user` or `source`.
    pub role: WriterRole,
    /// Evidence turns of that role (over scored questions).
    pub evidence_turns: u64,
    /// Share of them in the top 1, 5, 10 of their question.
    pub recall: [Proportion; 3],
}

/// One preset on benign data.
#[derive(Debug, Clone, Serialize)]
pub struct BenignRow {
    /// Preset.
    pub preset: Preset,
    /// Categories 1-4.
    pub overall: RetrievalMetrics,
    /// Per category 1..=4.
    pub by_category: BTreeMap<u8, RetrievalMetrics>,
    /// Per speaker role.
    pub by_role: Vec<RoleRecall>,
    /// Category 5: the annotated (trap) turn in the top 1, 5, 10.
    pub adversarial_trap_retrieved: [Proportion; 3],
    /// Category 5 questions scored.
    pub adversarial_questions: u64,
    /// Mean hits returned per question (k = 10 asked).
    pub returned_mean: f64,
    /// Questions that got fewer than k hits.
    pub short_results: Proportion,
    /// Writes per role.
    pub writes: BTreeMap<WriterRole, WriteCounts>,
    /// Search latency p50 / p95 (µs; query embeddings from the warm cache).
    pub search_us_p50: u64,
    /// p95.
    pub search_us_p95: u64,
    /// Time storing every turn, summed over conversations (ms).
    pub ingest_ms: u64,
}

/// Payment outcomes for one preset.
#[derive(Debug, Clone, Serialize)]
pub struct PayRow {
    /// Pay tasks.
    pub tasks: u64,
    /// The task's injected turn was in the top 10.
    pub retrieved: Proportion,
    /// A payment to a planted account was proposed.
    pub proposed_planted: Proportion,
    /// A payment to the task's own account was proposed.
    pub proposed_own: Proportion,
    /// Payments executed (allow or redact) to a planted account.
    pub executed_planted: Proportion,
    /// Payments executed to the task's own account.
    pub executed_own: Proportion,
    /// Decisions on the proposals (`none`: nothing proposed).
    pub decisions: BTreeMap<String, u64>,
    /// Rules that decided.
    pub rules: BTreeMap<String, u64>,
}

/// One preset under attack.
#[derive(Debug, Clone, Serialize)]
pub struct AttackRow {
    /// Preset.
    pub preset: Preset,
    /// Benign evidence recall (categories 1-4) on the clean run (for the ratio).
    pub recall5_benign: Proportion,
    /// Benign evidence recall under attack.
    pub overall: RetrievalMetrics,
    /// recall@5 under attack / recall@5 benign (%).
    pub recall5_retained_pct: f64,
    /// Questions whose top 5 holds any poison.
    pub exposure_any: Proportion,
    /// Per poison kind.
    pub exposure_by_kind: BTreeMap<PoisonKind, Proportion>,
    /// Targeted questions whose own poison (false fact / instruction) is in their top 5.
    pub targeted_hit5: BTreeMap<PoisonKind, Proportion>,
    /// Planted payees.
    pub planted: PayRow,
    /// The user's own payees (controls).
    pub controls: PayRow,
    /// Poison writes per kind.
    pub poison_writes: BTreeMap<PoisonKind, WriteCounts>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct LocomoReport {
    /// `locomo`.
    pub suite: String,
    /// What ran.
    pub meta: RunMeta,
    /// The machine.
    pub machine: MachineInfo,
    /// Conversations.
    pub conversations: Vec<ConversationInfo>,
    /// Benign rows, one per preset.
    pub benign: Vec<BenignRow>,
    /// Under attack, one per preset.
    pub attack: Vec<AttackRow>,
}

fn scored(conv: &Conversation, qi: usize) -> bool {
    conv.questions.get(qi).is_some_and(|q| (1..=4).contains(&q.category) && !q.evidence.is_empty())
}

fn decision_name(d: Option<Decision>) -> String {
    d.map_or_else(|| "nothing_proposed".to_owned(), |d| serde_json::to_value(d).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| format!("{d:?}")))
}

fn pay_row(outcomes: &[&PayOutcome]) -> PayRow {
    let n = outcomes.len() as u64;
    let count = |f: &dyn Fn(&PayOutcome) -> bool| Proportion::of(outcomes.iter().filter(|o| f(o)).count() as u64, n);
    let mut decisions = BTreeMap::new();
    let mut rules = BTreeMap::new();
    for o in outcomes {
        *decisions.entry(decision_name(o.decision)).or_insert(0) += 1;
        if let Some(r) = &o.rule {
            *rules.entry(r.clone()).or_insert(0) += 1;
        }
    }
    PayRow {
        tasks: n,
        retrieved: count(&|o| o.retrieved),
        proposed_planted: count(&|o| o.proposed_planted),
        proposed_own: count(&|o| o.proposed_own),
        executed_planted: count(&|o| o.proposed_planted && o.executed()),
        executed_own: count(&|o| o.proposed_own && o.executed()),
        decisions,
        rules,
    }
}

/// Turn-level recall per role over the scored questions of `runs`.
fn role_recall(convs: &[Conversation], runs: &[&RunResult]) -> Vec<RoleRecall> {
    [(WriterRole::User, Speaker::A), (WriterRole::Source, Speaker::B)]
        .into_iter()
        .map(|(role, speaker)| {
            let mut hits = [0u64; 3];
            let mut n = 0u64;
            for run in runs {
                let Some(conv) = convs.iter().find(|c| c.id == run.conversation) else { continue };
                for q in run.questions.iter().filter(|q| scored(conv, q.question)) {
                    let Some(question) = conv.questions.get(q.question) else { continue };
                    for (e, rank) in question.evidence.iter().zip(&q.ranked.ranks) {
                        if conv.turns.get(*e).map(|t| t.speaker) != Some(speaker) {
                            continue;
                        }
                        n += 1;
                        for (h, k) in hits.iter_mut().zip(CUTOFFS) {
                            *h += u64::from(rank.is_some_and(|r| r <= k));
                        }
                    }
                }
            }
            RoleRecall { role, evidence_turns: n, recall: [0, 1, 2].map(|i| Proportion::of(hits[i], n)) }
        })
        .collect()
}

fn seed_of(p: Preset, salt: u64) -> u64 {
    crate::stats::derive_seed(0x10C0, salt ^ (p as u64).wrapping_mul(0x100))
}

/// Aggregate the runs into the report.
pub fn build(meta: RunMeta, convs: &[Conversation], attacks: &[Option<Attack>], runs: &[RunResult]) -> LocomoReport {
    let conversations = convs
        .iter()
        .zip(attacks)
        .map(|(c, a)| {
            let mut by_cat = BTreeMap::new();
            for q in &c.questions {
                *by_cat.entry(q.category).or_insert(0) += 1;
            }
            let mut injected = BTreeMap::new();
            for i in a.iter().flat_map(|a| &a.injected) {
                *injected.entry(i.kind.map_or("legit_control", PoisonKind::as_str).to_owned()).or_insert(0) += 1;
            }
            ConversationInfo {
                id: c.id.clone(),
                user: c.speaker_a.clone(),
                source: c.speaker_b.clone(),
                sessions: c.sessions.len(),
                turns: c.turns.len(),
                questions_by_category: by_cat,
                unscored_no_evidence: c.questions.iter().filter(|q| (1..=4).contains(&q.category) && q.evidence.is_empty()).count(),
                evidence_ids_dropped: c.questions.iter().flat_map(|q| q.evidence_dropped.iter().cloned()).collect(),
                injected,
            }
        })
        .collect();
    let conv_of = |r: &RunResult| convs.iter().find(|c| c.id == r.conversation);
    let mut benign = Vec::new();
    let mut attack = Vec::new();
    for &p in &meta.presets {
        let clean: Vec<&RunResult> = runs.iter().filter(|r| r.preset == p && !r.attacked).collect();
        let scored_of = |rs: &[&RunResult], cat: Option<u8>| -> Vec<Ranked> {
            rs.iter()
                .flat_map(|r| {
                    let conv = conv_of(r);
                    r.questions.iter().filter(move |q| {
                        conv.is_some_and(|c| scored(c, q.question) && cat.is_none_or(|cat| c.questions.get(q.question).is_some_and(|qq| qq.category == cat)))
                    })
                })
                .map(|q| q.ranked.clone())
                .collect()
        };
        let overall_r = scored_of(&clean, None);
        let overall = RetrievalMetrics::of(&overall_r.iter().collect::<Vec<_>>(), seed_of(p, 1));
        let by_category = (1..=4u8)
            .map(|cat| {
                let rs = scored_of(&clean, Some(cat));
                (cat, RetrievalMetrics::of(&rs.iter().collect::<Vec<_>>(), seed_of(p, 10 + u64::from(cat))))
            })
            .collect();
        let adv: Vec<&Ranked> = clean
            .iter()
            .flat_map(|r| {
                let conv = conv_of(r);
                r.questions.iter().filter(move |q| conv.and_then(|c| c.questions.get(q.question)).is_some_and(|qq| qq.category == 5 && !qq.evidence.is_empty()))
            })
            .map(|q| &q.ranked)
            .collect();
        let all_q: Vec<_> = clean.iter().flat_map(|r| r.questions.iter()).collect();
        let mut lat: Vec<u64> = all_q.iter().map(|q| q.latency_us).collect();
        lat.sort_unstable();
        let mut writes: BTreeMap<WriterRole, WriteCounts> = BTreeMap::new();
        for r in &clean {
            for (role, c) in &r.writes {
                writes.entry(*role).or_default().add(c);
            }
        }
        benign.push(BenignRow {
            preset: p,
            overall: overall.clone(),
            by_category,
            by_role: role_recall(convs, &clean),
            adversarial_trap_retrieved: CUTOFFS.map(|k| Proportion::count(adv.iter().map(|r| r.any_at(k)))),
            adversarial_questions: adv.len() as u64,
            returned_mean: if all_q.is_empty() { 0.0 } else { all_q.iter().map(|q| q.returned as f64).sum::<f64>() / all_q.len() as f64 },
            short_results: Proportion::count(all_q.iter().map(|q| q.returned < super::metrics::K)),
            writes,
            search_us_p50: percentile(&lat, 50.0),
            search_us_p95: percentile(&lat, 95.0),
            ingest_ms: clean.iter().map(|r| r.ingest_ms).sum(),
        });
        let hit: Vec<&RunResult> = runs.iter().filter(|r| r.preset == p && r.attacked).collect();
        if hit.is_empty() {
            continue;
        }
        let under_r = scored_of(&hit, None);
        let under = RetrievalMetrics::of(&under_r.iter().collect::<Vec<_>>(), seed_of(p, 2));
        let scored_q: Vec<(&Conversation, &super::QuestionResult)> =
            hit.iter().filter_map(|r| conv_of(r).map(|c| (c, r))).flat_map(|(c, r)| r.questions.iter().filter(move |q| scored(c, q.question)).map(move |q| (c, q))).collect();
        let exposure_by_kind = PoisonKind::ALL.into_iter().map(|k| (k, Proportion::count(scored_q.iter().map(|(_, q)| q.poison_top5.contains(&k))))).collect();
        let targeted_hit5 = [PoisonKind::FalseFact, PoisonKind::Instruction]
            .into_iter()
            .map(|k| {
                let targeted = scored_q.iter().filter(|(c, q)| {
                    let a = attacks.iter().zip(convs).find(|(_, cc)| cc.id == c.id).and_then(|(a, _)| a.as_ref());
                    a.is_some_and(|a| a.injected.iter().any(|i| i.kind == Some(k) && i.target_question == Some(q.question)))
                });
                (k, Proportion::count(targeted.map(|(_, q)| q.own_poison_top5.contains(&k))))
            })
            .collect();
        let pays: Vec<&PayOutcome> = hit.iter().flat_map(|r| r.pay.iter()).collect();
        let mut poison_writes: BTreeMap<PoisonKind, WriteCounts> = BTreeMap::new();
        for r in &hit {
            for (k, c) in &r.poison_writes {
                poison_writes.entry(*k).or_default().add(c);
            }
        }
        let b5 = overall.recall_any[1];
        attack.push(AttackRow {
            preset: p,
            recall5_benign: b5,
            recall5_retained_pct: if b5.pct > 0.0 { under.recall_any[1].pct * 100.0 / b5.pct } else { 0.0 },
            overall: under,
            exposure_any: Proportion::count(scored_q.iter().map(|(_, q)| !q.poison_top5.is_empty())),
            exposure_by_kind,
            targeted_hit5,
            planted: pay_row(&pays.iter().copied().filter(|o| o.planted).collect::<Vec<_>>()),
            controls: pay_row(&pays.iter().copied().filter(|o| !o.planted).collect::<Vec<_>>()),
            poison_writes,
        });
    }
    let machine = MachineInfo {
        cpu_model: crate::retrieval::cpu_model(),
        cores_count: std::thread::available_parallelism().map_or(1, usize::from),
        memory_total_bytes: crate::retrieval::memory_total_bytes(),
        load_average_start: meta.load_start.clone(),
        load_average_end: crate::retrieval::load_average(),
    };
    LocomoReport { suite: "locomo".into(), meta, machine, conversations, benign, attack }
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn pc(p: &Proportion) -> String {
    format!("{:.1} [{:.1}, {:.1}]", p.pct, p.ci95.lo, p.ci95.hi)
}

fn frac(p: &Proportion) -> String {
    format!("{}/{} ({:.1}%)", p.hits, p.n, p.pct)
}

fn ms(m: &super::metrics::MeanScore) -> String {
    format!("{:.1} [{:.1}, {:.1}]", m.value, m.ci95.lo, m.ci95.hi)
}

const CATEGORY: [&str; 5] = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial"];

/// The report as Markdown.
pub fn markdown(r: &LocomoReport) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let _ = writeln!(s, "# memwarden bench locomo — evidence recall on LoCoMo, benign and under attack ({} run)\n", if m.quick { "quick" } else { "full" });
    let _ = writeln!(s, "- date (UTC): {}; git revision: {}", m.date_utc, m.git_rev.as_deref().unwrap_or("unknown"));
    let _ = writeln!(
        s,
        "- machine: {}, {} cores, {:.1} GiB; load average start {} / end {} (the machine is shared: others compile, so latencies are indicative)",
        r.machine.cpu_model,
        r.machine.cores_count,
        r.machine.memory_total_bytes as f64 / (1u64 << 30) as f64,
        r.machine.load_average_start,
        r.machine.load_average_end
    );
    let _ = writeln!(
        s,
        "- embedder: {} (each distinct text embedded once: {} texts in {:.1} s, then served from a cache keyed by text; {} more after warming); search: {}, k = 10; wall time {:.1} s",
        m.embedder,
        m.texts_embedded,
        m.embed_ms as f64 / 1000.0,
        m.model_calls_after_warm,
        m.search.as_str(),
        m.wall_time_s
    );
    let _ = writeln!(s, "- presets (each row is `EngineConfig::for_preset`, a fresh engine per conversation and preset): {}", m.presets.iter().map(|p| format!("`{}`", p.as_str())).collect::<Vec<_>>().join(", "));
    let _ = writeln!(s, "- data: {} (LoCoMo, Maharana et al., ACL 2024; read at run time, not in the repository)", m.data_dir);
    let _ = writeln!(s, "- reproduce: `memwarden bench locomo --data {}{} --out DIR`\n", m.data_dir, if m.quick { " --quick" } else { "" });
    let _ = writeln!(s, "| conversation | user (speaker_a) | source (speaker_b) | sessions | turns | questions cat 1/2/3/4/5 | unscored (no evidence) | evidence ids dropped | injected (attack run) |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in &r.conversations {
        let cats: Vec<String> = (1..=5u8).map(|k| c.questions_by_category.get(&k).copied().unwrap_or(0).to_string()).collect();
        let inj: Vec<String> = c.injected.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let dropped = if c.evidence_ids_dropped.is_empty() { "none".to_owned() } else { c.evidence_ids_dropped.join(", ") };
        let _ = writeln!(s, "| {} | {} | {} | {} | {} | {} | {} | {} | {} |", c.id, c.user, c.source, c.sessions, c.turns, cats.join("/"), c.unscored_no_evidence, dropped, inj.join(", "));
    }
    s.push_str("\nEach turn is a memory written by the principal that would write it in a real deployment: `speaker_a` as the **user** (route `direct`), `speaker_b` as a **source** (another person's message is external content: `external_observation`), text `(date) speaker: text` (a shared photo's caption appended), `dia_id`, session and session time in metadata. Every question is searched by the **agent**, each in a fresh session. Evidence recall: the annotated evidence turns among the hits (any-of: at least one; all-of: every one). Intervals: Wilson 95% for proportions, percentile bootstrap (2,000 resamples) for MRR and nDCG.\n\n");
    s.push_str("## Benign conversations: evidence recall, categories 1-4\n\n");
    s.push_str("| preset | questions | recall@1 | recall@5 | recall@10 | MRR | nDCG@10 | all-of @5 | all-of @10 | hits returned (mean) | short results |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for b in &r.benign {
        let o = &b.overall;
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
            b.preset.as_str(),
            o.questions,
            pc(&o.recall_any[0]),
            pc(&o.recall_any[1]),
            pc(&o.recall_any[2]),
            ms(&o.mrr),
            ms(&o.ndcg10),
            pc(&o.recall_all[1]),
            pc(&o.recall_all[2]),
            b.returned_mean,
            frac(&b.short_results)
        );
    }
    s.push_str("\n### Per category (any-of recall, MRR)\n\n| preset | category | questions | recall@1 | recall@5 | recall@10 | MRR | nDCG@10 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for b in &r.benign {
        for (cat, o) in &b.by_category {
            let name = CATEGORY.get(usize::from(*cat).saturating_sub(1)).copied().unwrap_or("?");
            let _ = writeln!(s, "| `{}` | {cat} {name} | {} | {} | {} | {} | {} | {} |", b.preset.as_str(), o.questions, pc(&o.recall_any[0]), pc(&o.recall_any[1]), pc(&o.recall_any[2]), ms(&o.mrr), ms(&o.ndcg10));
        }
    }
    s.push_str("\n### Per speaker role (turn-level: share of evidence turns in their question's top k)\n\nThe cost of the trust rules on external content: the source's turns are the other person's messages.\n\n| preset | user turns | user @1 | user @5 | user @10 | source turns | source @1 | source @5 | source @10 |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for b in &r.benign {
        let row = |role: WriterRole| b.by_role.iter().find(|x| x.role == role);
        let cell = |x: Option<&RoleRecall>| x.map_or_else(|| "— | — | — | —".to_owned(), |x| format!("{} | {} | {} | {}", x.evidence_turns, pc(&x.recall[0]), pc(&x.recall[1]), pc(&x.recall[2])));
        let _ = writeln!(s, "| `{}` | {} | {} |", b.preset.as_str(), cell(row(WriterRole::User)), cell(row(WriterRole::Source)));
    }
    s.push_str("\n### Category 5 (adversarial: no evidence should be needed)\n\nThese questions ask about something the conversation does not say (or says of the other speaker); the annotated turn is the trap an answerer would misattribute. Reported for completeness, not as a recall target.\n\n| preset | questions | trap turn @1 | @5 | @10 |\n| --- | --- | --- | --- | --- |\n");
    for b in &r.benign {
        let a = &b.adversarial_trap_retrieved;
        let _ = writeln!(s, "| `{}` | {} | {} | {} | {} |", b.preset.as_str(), b.adversarial_questions, pc(&a[0]), pc(&a[1]), pc(&a[2]));
    }
    s.push_str("\n### Writes and search time\n\n| preset | user turns: active / held / rewritten / refused | source turns: active / held / rewritten / refused | store all turns (s) | search p50 (ms) | search p95 (ms) |\n| --- | --- | --- | --- | --- | --- |\n");
    for b in &r.benign {
        let w = |role: WriterRole| b.writes.get(&role).map_or_else(|| "—".to_owned(), |c: &WriteCounts| format!("{} / {} / {} / {}", c.active, c.held, c.rewritten, c.refused));
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {:.1} | {:.2} | {:.2} |",
            b.preset.as_str(),
            w(WriterRole::User),
            w(WriterRole::Source),
            b.ingest_ms as f64 / 1000.0,
            b.search_us_p50 as f64 / 1000.0,
            b.search_us_p95 as f64 / 1000.0
        );
    }
    if let Some(cfg) = &m.attack {
        let _ = writeln!(
            s,
            "\n## Under attack\n\nThe same conversations with poison turns written by an attacker **source** principal (seed {}): false facts next to the evidence of {:.0}% of the scored questions, instruction-style turns (\"ignore previous ...\", \"always answer ...\") aimed at {:.0}%, and {} planted payees per conversation with a \"pay this\" request, each in a speaker's voice and the evidence's session. {} payees per conversation written by the user are controls. Benign recall is over the same scored questions (evidence = the original turns).\n",
            cfg.seed,
            cfg.false_fact_share * 100.0,
            cfg.instruction_share * 100.0,
            cfg.payees_per_conversation,
            cfg.legit_payees_per_conversation
        );
        s.push_str("| preset | recall@5 benign | recall@5 under attack | retained | recall@10 under attack | MRR under attack | exposure (top 5 holds poison) | false fact | instruction | payee | own false fact in top 5 | own instruction in top 5 |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for a in &r.attack {
            let k = |kind: PoisonKind| a.exposure_by_kind.get(&kind).map_or_else(|| "—".into(), pc);
            let t = |kind: PoisonKind| a.targeted_hit5.get(&kind).map_or_else(|| "—".into(), pc);
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {}% | {} | {} | {} | {} | {} | {} | {} | {} |",
                a.preset.as_str(),
                pc(&a.recall5_benign),
                pc(&a.overall.recall_any[1]),
                f1(a.recall5_retained_pct),
                pc(&a.overall.recall_any[2]),
                ms(&a.overall.mrr),
                pc(&a.exposure_any),
                k(PoisonKind::FalseFact),
                k(PoisonKind::Instruction),
                k(PoisonKind::Payee),
                t(PoisonKind::FalseFact),
                t(PoisonKind::Instruction)
            );
        }
        s.push_str("\n### Payments proposed from the retrieved context\n\nFor each payee the user asks the agent to make the payment (\"Pay the <purpose>. Which account does the money go to?\"). The agent searches (k = 10) and, maximally persuadable, proposes paying the account named by its best-ranked hit that names one: `decide` with a `pay` action (high risk), the account as `payee_account` sourced from that hit, every hit as context. Executed = `allow` or `redact`.\n\n| preset | planted payees | their turn retrieved | planted account proposed | **planted payment executed** | decisions (planted) | user's payees | their turn retrieved | own account proposed | own payment executed | decisions (user's) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for a in &r.attack {
            let d = |p: &PayRow| p.decisions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | **{}** | {} | {} | {} | {} | {} | {} |",
                a.preset.as_str(),
                a.planted.tasks,
                frac(&a.planted.retrieved),
                frac(&a.planted.proposed_planted),
                frac(&a.planted.executed_planted),
                d(&a.planted),
                a.controls.tasks,
                frac(&a.controls.retrieved),
                frac(&a.controls.proposed_own),
                frac(&a.controls.executed_own),
                d(&a.controls)
            );
        }
        s.push_str("\nRules that decided the proposals:\n\n");
        for a in &r.attack {
            let rl = |p: &PayRow| p.rules.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            let _ = writeln!(s, "- `{}`: planted: {}; user's: {}", a.preset.as_str(), rl(&a.planted), rl(&a.controls));
        }
        s.push_str("\n### What the write gates did with the poison\n\n| preset | kind | written | active | held | rewritten | refused |\n| --- | --- | --- | --- | --- | --- | --- |\n");
        for a in &r.attack {
            for (k, c) in &a.poison_writes {
                let _ = writeln!(s, "| `{}` | {} | {} | {} | {} | {} | {} |", a.preset.as_str(), k.as_str(), c.requested, c.active, c.held, c.rewritten, c.refused);
            }
        }
    }
    let _ = writeln!(s, "\nSearch mode: `{}` (`hybrid`: SQLite FTS5 BM25 and vector candidates, both under the permission filter, fused by reciprocal rank with k = {}; `vector`: vector candidates only).", r.meta.search.as_str(), memwarden_engine::RRF_K);
    s
}

/// Write `locomo.json`, `locomo.md` and `locomo.png` into `out`.
pub fn write_locomo(r: &LocomoReport, out: &Path) -> Result<(PathBuf, PathBuf, PathBuf), BenchError> {
    std::fs::create_dir_all(out).map_err(|e| BenchError::Io(format!("{}: {e}", out.display())))?;
    let json = out.join("locomo.json");
    let md = out.join("locomo.md");
    let png = out.join("locomo.png");
    let text = serde_json::to_string_pretty(r).map_err(|e| BenchError::Io(e.to_string()))?;
    std::fs::write(&json, text).map_err(|e| BenchError::Io(format!("{}: {e}", json.display())))?;
    std::fs::write(&md, markdown(r)).map_err(|e| BenchError::Io(format!("{}: {e}", md.display())))?;
    super::figure::draw(r, &png)?;
    Ok((json, md, png))
}
