//! LoCoMo question answering with a language model (`memwarden bench locomo-qa`, issue 37
//! item 2): memwarden retrieves under each preset, a model behind any OpenAI-compatible chat
//! endpoint answers from what it was handed, and the answers are scored with LoCoMo's own token
//! F1 (and, when asked, by an LLM judge), next to the evidence recall of the same retrievals.
//!
//! - **Questions**: categories 1-4 (category 5 is adversarial: its gold answer is a refusal),
//!   a deterministic sample spread evenly over each conversation's questions
//!   ([`sample_questions`]).
//! - **Retrieval**: [`super::run_one_observed`], the benign run of the retrieval benchmark (the
//!   same principals, routes and namespace; the agent searches each question in a session of its
//!   own, k = 10). The answering model sees what the engine returned, in its order, as the engine
//!   returned it (a rewritten or labelled text stays so).
//! - **Answer**: greedy decoding; the prompts are [`ANSWER_SYSTEM`] and [`answer_prompt`]. Two
//!   presets that hand the model the same memories in the same order give the same prompt, and
//!   a greedy model the same answer: such prompts are asked once (counted in the report).
//! - **Scores**: [`f1`] is LoCoMo's `f1_score` (lower case, punctuation, articles and "and"
//!   removed, tokens stemmed, bag-of-tokens F1); category 1 uses its multi-answer form (the
//!   prediction and the gold split on commas, each gold part's best match averaged); category
//!   3's gold is its first `;` part. LoCoMo stems with NLTK's Porter stemmer; this one uses
//!   Snowball's English stemmer (Porter2), which differs on a few suffixes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memwarden_engine::{Preset, SearchHit};
use serde::Serialize;

use super::data::Conversation;
use super::{CachingEmbedder, EmbedderChoice, SearchMode};
use crate::BenchError;
use crate::openai::{OpenAiAgent, OpenAiAgentConfig};

/// Questions asked by default.
pub const QUESTIONS_DEFAULT: usize = 200;
/// Largest answer the model may write (tokens): a short phrase.
pub const ANSWER_TOKENS_MAX: u32 = 48;
/// Bootstrap resamples for the F1 intervals.
pub const BOOTSTRAP_RESAMPLES: usize = 2_000;

/// The answering model's system prompt.
pub const ANSWER_SYSTEM: &str = "You answer questions about a long chat between two people, using only the memories you are given. Each memory is one message of the chat with its date. Answer in a few words: a name, a date, a place or a short phrase, no explanation. For questions about when something happened, use the dates of the messages. Reply with one JSON object: {\"answer\": \"...\"}.";

/// The judge's system prompt (used with `--judge`).
pub const JUDGE_SYSTEM: &str = "You grade answers to questions about a chat. You are given a question, the gold answer and a generated answer. Label the generated answer CORRECT if it states the same thing as the gold answer (other wording, a superset of details, or the same date written differently all count), WRONG otherwise. Reply with one JSON object: {\"label\": \"CORRECT\"} or {\"label\": \"WRONG\"}.";

/// Options of one question-answering run.
#[derive(Debug, Clone)]
pub struct QaOptions {
    /// Where the LoCoMo conversations are.
    pub data_dir: PathBuf,
    /// Conversation ids (empty: the five of the shared subset).
    pub conversations: Vec<String>,
    /// Presets (empty: `none` and `full`).
    pub presets: Vec<Preset>,
    /// Questions in the sample.
    pub questions: usize,
    /// Embedder.
    pub embedder: EmbedderChoice,
    /// Search mode.
    pub search: SearchMode,
    /// The answering model's endpoint.
    pub model: OpenAiAgentConfig,
    /// Also ask the model to judge each answer against the gold one.
    pub judge: bool,
    /// How many of the search's hits (best first, at most 10) the model is given.
    pub context_k: usize,
    /// Git revision to stamp.
    pub git_rev: Option<String>,
}

/// One answer under one preset.
#[derive(Debug, Clone, Serialize)]
pub struct QaAnswer {
    /// Conversation id.
    pub conversation: String,
    /// Index into the conversation's questions.
    pub question: usize,
    /// LoCoMo category (1-4).
    pub category: u8,
    /// Preset.
    pub preset: String,
    /// The question.
    pub text: String,
    /// The gold answer.
    pub gold: String,
    /// The model's answer (`None`: the call or its parse failed; scored 0).
    pub answer: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// LoCoMo F1 (0-1).
    pub f1: f64,
    /// The judge's label (with `--judge`; `None` when it failed or was not asked).
    pub judge_correct: Option<bool>,
    /// An evidence turn was among the hits the model was given.
    pub evidence_given: bool,
    /// Hits the model was given.
    pub hits: usize,
}

/// One preset's row.
#[derive(Debug, Clone, Serialize)]
pub struct QaRow {
    /// Preset.
    pub preset: String,
    /// Questions.
    pub n: usize,
    /// Mean F1 × 100.
    pub f1: f64,
    /// Bootstrap 95% interval of the mean F1 × 100.
    pub f1_ci95: (f64, f64),
    /// Mean F1 × 100 per category (n, F1).
    pub f1_by_category: BTreeMap<u8, (usize, f64)>,
    /// Judge accuracy (%) and its Wilson 95% interval, over the answers the judge labelled.
    pub judge: Option<(f64, crate::stats::Interval, usize)>,
    /// Share of questions (%) whose hits held an evidence turn (recall@10 any-of on the sample).
    pub evidence_given: f64,
    /// Mean F1 × 100 over the questions whose hits held evidence.
    pub f1_evidence_given: f64,
    /// Answers that failed (no usable answer).
    pub failures: usize,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct QaReport {
    /// Always `"locomo-qa"`.
    pub suite: String,
    /// The model, endpoint and decoding.
    pub agent: String,
    /// The answer prompt (system), verbatim.
    pub answer_system: String,
    /// The answer prompt's user part, for a placeholder question.
    pub answer_template: String,
    /// The judge's prompt, when judged.
    pub judge_system: Option<String>,
    /// Embedder.
    pub embedder: String,
    /// Search mode.
    pub search: String,
    /// Hits given to the model.
    pub context_k: usize,
    /// Conversations.
    pub conversations: Vec<String>,
    /// Git revision.
    pub git_rev: Option<String>,
    /// Start (UTC).
    pub date_utc: String,
    /// Wall time (s).
    pub wall_time_s: f64,
    /// Model calls made, and distinct answer prompts (identical prompts asked once).
    pub model_calls: u64,
    /// Tokens spent.
    pub tokens: u64,
    /// Per preset.
    pub rows: Vec<QaRow>,
    /// Every answer.
    pub answers: Vec<QaAnswer>,
    /// How to read it.
    pub notes: Vec<String>,
}

/// `n` questions of categories 1-4 spread over `convs`: each conversation's quota (an even
/// share, the remainder to the first ones) is taken at evenly spaced positions of its eligible
/// questions. Returns (conversation index, question index), in conversation and question order.
pub fn sample_questions(convs: &[Conversation], n: usize) -> Vec<(usize, usize)> {
    let eligible: Vec<Vec<usize>> =
        convs.iter().map(|c| c.questions.iter().enumerate().filter(|(_, q)| (1..=4).contains(&q.category) && !q.answer.trim().is_empty()).map(|(i, _)| i).collect()).collect();
    let total: usize = eligible.iter().map(Vec::len).sum();
    let n = n.min(total);
    // Quotas by water-filling: even shares, and what a short conversation cannot take goes to
    // the others.
    let mut quotas = vec![0usize; eligible.len()];
    let mut left = n;
    loop {
        let open = quotas.iter().zip(&eligible).filter(|(q, list)| **q < list.len()).count();
        if left == 0 || open == 0 {
            break;
        }
        let each = (left / open).max(1);
        for (q, list) in quotas.iter_mut().zip(&eligible) {
            let add = each.min(list.len() - *q).min(left);
            *q += add;
            left -= add;
        }
    }
    debug_assert_eq!(quotas.iter().sum::<usize>(), n);
    let mut out = Vec::with_capacity(n);
    for (ci, (list, &quota)) in eligible.iter().zip(&quotas).enumerate() {
        for j in 0..quota {
            let at = ((2 * j + 1) * list.len()) / (2 * quota);
            if let Some(q) = list.get(at) {
                out.push((ci, *q));
            }
        }
    }
    debug_assert!(out.len() <= n);
    debug_assert!(out.windows(2).all(|w| w[0] < w[1]));
    out
}

/// LoCoMo's answer normalisation: lower case, commas and punctuation removed, the articles and
/// "and" removed, whitespace collapsed; then each token stemmed.
fn tokens(s: &str) -> Vec<String> {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    let lower: String = s.to_lowercase().chars().filter(|c| !c.is_ascii_punctuation()).collect();
    lower.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the" | "and")).map(|w| stemmer.stem(w).into_owned()).collect()
}

/// LoCoMo's `f1_score`: bag-of-tokens F1 of `prediction` against `gold` (0 when nothing is
/// shared).
pub fn f1_score(prediction: &str, gold: &str) -> f64 {
    let (p, g) = (tokens(prediction), tokens(gold));
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in &g {
        *counts.entry(t.as_str()).or_insert(0) += 1;
    }
    let mut same = 0i64;
    for t in &p {
        if let Some(c) = counts.get_mut(t.as_str())
            && *c > 0
        {
            *c -= 1;
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    let f = 2.0 * precision * recall / (precision + recall);
    debug_assert!((0.0..=1.0).contains(&f));
    f
}

/// LoCoMo's score for a question of `category`: multi-answer F1 for category 1, the first `;`
/// part of the gold for category 3, plain F1 otherwise.
pub fn f1(prediction: &str, gold: &str, category: u8) -> f64 {
    match category {
        1 => {
            let preds: Vec<&str> = prediction.split(',').map(str::trim).collect();
            let golds: Vec<&str> = gold.split(',').map(str::trim).collect();
            let sum: f64 = golds.iter().map(|g| preds.iter().map(|p| f1_score(p, g)).fold(0.0, f64::max)).sum();
            sum / golds.len().max(1) as f64
        }
        3 => f1_score(prediction, gold.split(';').next().unwrap_or(gold)),
        _ => f1_score(prediction, gold),
    }
}

/// The answer prompt's user part: the hits, numbered, best first, then the question.
pub fn answer_prompt(hits: &[String], question: &str) -> String {
    let mut s = String::from("Memories (most relevant first):\n");
    for (i, h) in hits.iter().enumerate() {
        s.push_str(&format!("[{}] {h}\n", i + 1));
    }
    s.push_str(&format!("\nQuestion: {question}"));
    s
}

fn answer_of(text: &str, key: &str) -> Result<String, String> {
    let (Some(a), Some(b)) = (text.find('{'), text.rfind('}')) else { return Err(format!("no JSON object in {:?}", text.chars().take(80).collect::<String>())) };
    if b < a {
        return Err("no JSON object".into());
    }
    let v: serde_json::Value = serde_json::from_str(&text[a..=b]).map_err(|e| format!("{e}"))?;
    match v.get(key) {
        Some(serde_json::Value::String(s)) => Ok(s.trim().to_owned()),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        // A list is a multi-part answer, as LoCoMo writes one: its parts joined by commas.
        Some(serde_json::Value::Array(parts)) if !parts.is_empty() && parts.iter().all(|p| p.is_string() || p.is_number()) => {
            Ok(parts.iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned)).collect::<Vec<_>>().join(", "))
        }
        _ => Err(format!("no \"{key}\" string")),
    }
}

/// The hits of every sampled question under every preset: (preset, conversation index,
/// question index) → (texts handed over, evidence among them).
type Retrieved = BTreeMap<(usize, usize, usize), (Vec<String>, bool)>;

fn retrieve(opts: &QaOptions, convs: &[Conversation], sample: &[(usize, usize)], presets: &[Preset], progress: &mut dyn FnMut(&str, usize, usize)) -> Result<(Retrieved, String), BenchError> {
    let inner: Arc<dyn memwarden_embed::Embedder> = match &opts.embedder {
        EmbedderChoice::Local(dir) => Arc::new(
            memwarden_embed::MiniLmEmbedder::load(&memwarden_embed::resolve_model_dir(dir.as_deref()).map_err(|e| BenchError::Agent(e.to_string()))?).map_err(|e| BenchError::Agent(e.to_string()))?,
        ),
        EmbedderChoice::Hash => Arc::new(memwarden_embed::HashEmbedder::new(384)),
    };
    let cache = Arc::new(CachingEmbedder::new(inner));
    let texts: Vec<String> = convs.iter().flat_map(|c| super::texts_of(c, None)).collect();
    cache.warm(&texts, &mut |d, n| progress("embedding", d, n)).map_err(|e| BenchError::Agent(e.to_string()))?;
    let mut out: Retrieved = BTreeMap::new();
    let total = presets.len() * convs.len();
    for (pi, preset) in presets.iter().enumerate() {
        for (ci, conv) in convs.iter().enumerate() {
            let wanted: Vec<usize> = sample.iter().filter(|(c, _)| *c == ci).map(|(_, q)| *q).collect();
            let mut handed: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            let mut observe = |qi: usize, hits: &[SearchHit]| {
                if wanted.contains(&qi) {
                    handed.insert(qi, hits.iter().map(|h| h.item.content().to_owned()).collect());
                }
            };
            let run = super::run_one_observed(conv, None, *preset, cache.clone(), opts.search, &mut observe)?;
            for qi in &wanted {
                let k = opts.context_k;
                let evidence = run.questions.get(*qi).is_some_and(|q| q.ranked.ranks.iter().any(|r| r.is_some_and(|r| r <= k)));
                let mut texts = handed.remove(qi).ok_or_else(|| BenchError::Invalid(format!("question {qi} of conversation {} was not searched", conv.id)))?;
                texts.truncate(k);
                out.insert((pi, ci, *qi), (texts, evidence));
            }
            progress("engine runs", pi * convs.len() + ci + 1, total);
        }
    }
    Ok((out, memwarden_embed::Embedder::name(cache.as_ref()).to_owned()))
}

/// Run the question-answering benchmark. `progress(stage, done, total)`.
pub fn run_qa(opts: &QaOptions, progress: &mut dyn FnMut(&str, usize, usize)) -> Result<QaReport, BenchError> {
    let started = Instant::now();
    let date_utc = crate::retrieval::utc_now();
    let presets: Vec<Preset> = if opts.presets.is_empty() { vec![Preset::None, Preset::Full] } else { opts.presets.clone() };
    let lopts = super::LocomoBenchOptions { conversations: opts.conversations.clone(), ..super::LocomoBenchOptions::new(&opts.data_dir, "") };
    let convs = super::load_conversations(&lopts)?;
    let sample = sample_questions(&convs, opts.questions);
    if sample.is_empty() {
        return Err(BenchError::Invalid("no question to ask".into()));
    }
    if !(1..=super::metrics::K).contains(&opts.context_k) {
        return Err(BenchError::Invalid(format!("context k must be 1..={}", super::metrics::K)));
    }
    let (retrieved, embedder) = retrieve(opts, &convs, &sample, &presets, progress)?;
    let mut model_cfg = opts.model.clone();
    model_cfg.max_tokens = ANSWER_TOKENS_MAX;
    let model = OpenAiAgent::new(model_cfg).map_err(BenchError::Agent)?;
    let mut answers = Vec::with_capacity(retrieved.len());
    let total = retrieved.len();
    for (done, ((pi, ci, qi), (hits, evidence))) in retrieved.iter().enumerate() {
        let (Some(conv), Some(preset)) = (convs.get(*ci), presets.get(*pi)) else { continue };
        let Some(q) = conv.questions.get(*qi) else { continue };
        let prompt = answer_prompt(hits, &q.text);
        // The client answers a prompt it was asked before from memory (two presets that hand
        // over the same memories in the same order).
        let reply = model.chat(ANSWER_SYSTEM, &prompt).map_err(|e| e.to_string()).and_then(|t| answer_of(&t, "answer"));
        let (answer, error) = match reply {
            Ok(a) => (Some(a), None),
            Err(e) => (None, Some(e)),
        };
        let score = answer.as_deref().map_or(0.0, |a| f1(a, &q.answer, q.category));
        let judge_correct = match (&answer, opts.judge) {
            (Some(a), true) => {
                let user = format!("Question: {}\nGold answer: {}\nGenerated answer: {a}", q.text, q.answer);
                model.chat(JUDGE_SYSTEM, &user).ok().and_then(|t| answer_of(&t, "label").ok()).map(|l| l.eq_ignore_ascii_case("correct"))
            }
            _ => None,
        };
        answers.push(QaAnswer {
            conversation: conv.id.clone(),
            question: *qi,
            category: q.category,
            preset: preset.as_str().to_owned(),
            text: q.text.clone(),
            gold: q.answer.clone(),
            answer,
            error,
            f1: score,
            judge_correct,
            evidence_given: *evidence,
            hits: hits.len(),
        });
        progress("answers", done + 1, total);
    }
    let rows: Vec<QaRow> = presets.iter().map(|p| row(p.as_str(), &answers)).collect();
    let stats = crate::agent::Agent::stats(&model);
    let describe = crate::agent::Agent::describe(&model);
    Ok(QaReport {
        suite: "locomo-qa".into(),
        agent: describe,
        answer_system: ANSWER_SYSTEM.into(),
        answer_template: answer_prompt(&["(date) speaker: message".to_owned()], "<question>"),
        judge_system: opts.judge.then(|| JUDGE_SYSTEM.to_owned()),
        embedder,
        search: opts.search.as_str().into(),
        context_k: opts.context_k,
        conversations: convs.iter().map(|c| c.id.clone()).collect(),
        git_rev: opts.git_rev.clone(),
        date_utc,
        wall_time_s: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        model_calls: stats.calls,
        tokens: stats.tokens,
        rows,
        notes: notes(&answers, model.repeats()),
        answers,
    })
}

fn row(preset: &str, answers: &[QaAnswer]) -> QaRow {
    let mine: Vec<&QaAnswer> = answers.iter().filter(|a| a.preset == preset).collect();
    let scores: Vec<f64> = mine.iter().map(|a| a.f1).collect();
    let mean = |xs: &[f64]| if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 };
    let (lo, hi) = crate::stats::bootstrap_ci(&scores, &mean, BOOTSTRAP_RESAMPLES, 0.95, 0x10C0_40A0);
    let mut by_cat: BTreeMap<u8, Vec<f64>> = BTreeMap::new();
    for a in &mine {
        by_cat.entry(a.category).or_default().push(a.f1);
    }
    let labelled: Vec<bool> = mine.iter().filter_map(|a| a.judge_correct).collect();
    let judge = (!labelled.is_empty()).then(|| {
        let ok = labelled.iter().filter(|x| **x).count() as u64;
        (crate::stats::pct(ok, labelled.len() as u64), crate::stats::wilson(ok, labelled.len() as u64), labelled.len())
    });
    let given: Vec<f64> = mine.iter().filter(|a| a.evidence_given).map(|a| a.f1).collect();
    let r2 = |x: f64| (x * 1000.0).round() / 10.0;
    QaRow {
        preset: preset.to_owned(),
        n: mine.len(),
        f1: r2(mean(&scores)),
        f1_ci95: (r2(lo), r2(hi)),
        f1_by_category: by_cat.iter().map(|(c, xs)| (*c, (xs.len(), r2(mean(xs))))).collect(),
        judge,
        evidence_given: crate::stats::pct(given.len() as u64, mine.len() as u64),
        f1_evidence_given: r2(mean(&given)),
        failures: mine.iter().filter(|a| a.answer.is_none()).count(),
    }
}

fn notes(answers: &[QaAnswer], repeats: u64) -> Vec<String> {
    vec![
        format!("{} answers; {repeats} prompts were answered from the run's memory: a prompt two presets share (the same memories in the same order) is asked once, and decoding is greedy, so asking again gives the same answer.", answers.len()),
        "F1 is LoCoMo's token F1 (category 1: multi-answer form; category 3: the gold's first `;` part) with Snowball's English stemmer where LoCoMo uses NLTK's Porter stemmer.".to_owned(),
        "Evidence given: an annotated evidence turn was among the hits the model was handed (recall@10 any-of on this sample). F1 where evidence was given separates the model's reading from the retrieval.".to_owned(),
        "The judge, when asked, is the same small model: its labels are a rough second opinion, not a calibrated grader.".to_owned(),
    ]
}

/// Render the report as Markdown.
pub fn markdown(r: &QaReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "# LoCoMo question answering with a language model\n");
    let _ = writeln!(s, "- model: `{}`", r.agent);
    let _ = writeln!(s, "- retrieval: memwarden, {} search, embedder {}, the first {} of k = {} hits given to the model; conversations {}", r.search, r.embedder, r.context_k, super::metrics::K, r.conversations.join(", "));
    let _ = writeln!(s, "- git: {} | date: {} | wall time: {:.1} s | model calls: {} | tokens: {}\n", r.git_rev.as_deref().unwrap_or("unknown"), r.date_utc, r.wall_time_s, r.model_calls, r.tokens);
    let _ = writeln!(s, "| preset | questions | F1 (95% CI) | F1 cat 1 / 2 / 3 / 4 | judge % (95% CI) | evidence given % | F1 where given | failures |");
    let _ = writeln!(s, "|---|---:|---|---|---|---:|---:|---:|");
    for row in &r.rows {
        let cats: Vec<String> = (1..=4u8).map(|c| row.f1_by_category.get(&c).map_or("-".into(), |(n, f)| format!("{f:.1} ({n})"))).collect();
        let judge = row.judge.as_ref().map_or("-".into(), |(p, ci, n)| format!("{p:.1} [{:.1}, {:.1}] of {n}", ci.lo, ci.hi));
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} [{:.1}, {:.1}] | {} | {judge} | {:.1} | {:.1} | {} |",
            row.preset,
            row.n,
            row.f1,
            row.f1_ci95.0,
            row.f1_ci95.1,
            cats.join(" / "),
            row.evidence_given,
            row.f1_evidence_given,
            row.failures
        );
    }
    let _ = writeln!(s, "\n## Prompts\n\nSystem:\n\n```\n{}\n```\n\nUser:\n\n```\n{}\n```\n", r.answer_system, r.answer_template);
    if let Some(j) = &r.judge_system {
        let _ = writeln!(s, "Judge:\n\n```\n{j}\n```\n");
    }
    let _ = writeln!(s, "## Notes\n");
    for n in &r.notes {
        let _ = writeln!(s, "- {n}");
    }
    s
}

/// Write `DIR/locomo-qa.json` and `DIR/locomo-qa.md`.
pub fn write_qa(r: &QaReport, dir: &std::path::Path) -> Result<(PathBuf, PathBuf), BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::Io(format!("cannot create {}: {e}", dir.display())))?;
    let (json, md) = (dir.join("locomo-qa.json"), dir.join("locomo-qa.md"));
    let body = serde_json::to_string_pretty(r).map_err(|e| BenchError::Io(format!("cannot encode the report: {e}")))?;
    std::fs::write(&json, body + "\n").map_err(|e| BenchError::Io(format!("cannot write {}: {e}", json.display())))?;
    std::fs::write(&md, markdown(r)).map_err(|e| BenchError::Io(format!("cannot write {}: {e}", md.display())))?;
    Ok((json, md))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (prediction, gold, category, expected F1), LoCoMo's scorer by hand.
    fn check(cases: &[(&str, &str, u8, f64)]) {
        for (p, g, c, want) in cases {
            let got = f1(p, g, *c);
            assert!((got - want).abs() < 1e-9, "f1({p:?}, {g:?}, {c}) = {got}, want {want}");
        }
    }

    #[test]
    fn locomo_f1_matches_the_scorer_on_hand_worked_cases() {
        check(&[
            ("7 May 2023", "7 May 2023", 2, 1.0),
            ("The beach.", "beach", 4, 1.0),
            ("Paris", "London", 4, 0.0),
            // Stemming: "paintings" and "painting" are one token.
            ("paintings", "painting", 4, 1.0),
            // Two of three gold tokens, two of two predicted: P 1, R 2/3.
            ("adoption agencies", "adoption agencies research", 4, 0.8),
            // Multi-answer: each gold part's best match, averaged.
            ("pottery, camping", "pottery, camping, painting", 1, 2.0 / 3.0),
            // Category 3 scores against the gold's first `;` part.
            ("likely yes", "Likely yes; she said so", 3, 1.0),
            ("", "anything", 4, 0.0),
        ]);
    }

    #[test]
    fn the_sample_spreads_over_conversations_and_skips_adversarial_questions() {
        let q = |i: usize, category: u8| super::super::data::Question { index: i, text: format!("q{i}"), answer: "a".into(), category, evidence: vec![], evidence_dropped: vec![] };
        let conv = |id: &str, n: usize| Conversation {
            id: id.into(),
            speaker_a: "A".into(),
            speaker_b: "B".into(),
            sessions: vec![],
            turns: vec![],
            questions: (0..n).map(|i| q(i, if i % 5 == 0 { 5 } else { 1 + (i % 4) as u8 })).collect(),
        };
        let convs = vec![conv("1", 50), conv("2", 20)];
        let s = sample_questions(&convs, 30);
        assert_eq!(s.len(), 30);
        assert_eq!(s.iter().filter(|(c, _)| *c == 0).count(), 15);
        assert!(s.iter().all(|(c, q)| convs[*c].questions[*q].category != 5));
        // Asking for more than there are gives every eligible question once.
        assert_eq!(sample_questions(&convs, 1_000).len(), 40 + 16);
    }

    #[test]
    fn answers_parse_from_json_and_prose_fails() {
        assert_eq!(answer_of("```json\n{\"answer\": \"7 May 2023\"}\n```", "answer").unwrap(), "7 May 2023");
        assert_eq!(answer_of("{\"answer\": 3}", "answer").unwrap(), "3");
        assert!(answer_of("It was in May.", "answer").is_err());
        // A list answer is LoCoMo's multi-part form.
        assert_eq!(answer_of("{\"answer\": [\"New York\", \"Los Angeles\"]}", "answer").unwrap(), "New York, Los Angeles");
        assert!(answer_of("{\"answer\": []}", "answer").is_err());
        assert!(answer_of("{\"other\": 1}", "answer").is_err());
    }
}
