//! Reading LoCoMo conversations (`<id>.json` as published in snap-research/locomo's
//! `data/locomo10.zip`, one conversation per file) from a directory given at run time. The data
//! is never copied into the repository.
//!
//! A conversation is `speaker_a`, `speaker_b`, sessions `session_<n>` (turns `{speaker, dia_id,
//! text, blip_caption?}`) with their times `session_<n>_date_time`, and `qa` (`{question, answer
//! | adversarial_answer, evidence: [dia_id...], category}`). Evidence ids are normalised (a few
//! are malformed in the published data: `"D8:6; D9:17"`, `"D:11:26"`); ids that name no turn are
//! dropped and counted, and a question left with no evidence is kept out of the recall metrics
//! (counted in the report).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::BenchError;

/// Largest conversation file read, in bytes.
pub const FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Most turns read from one conversation.
pub const TURNS_MAX: usize = 20_000;
/// Most questions read from one conversation.
pub const QUESTIONS_MAX: usize = 10_000;
/// Most sessions looked for in one conversation.
pub const SESSIONS_MAX: usize = 200;
/// The five conversations of the shared subset, smallest first is `30`.
pub const DEFAULT_CONVERSATIONS: [&str; 5] = ["26", "30", "41", "42", "43"];

/// Which of the two speakers a turn belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// `speaker_a`: stored as written by the user.
    A,
    /// `speaker_b`: stored as written by a source (another person's message).
    B,
}

/// One dialogue turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// `D<session>:<n>`.
    pub dia_id: String,
    /// Which speaker.
    pub speaker: Speaker,
    /// The speaker's name as in the data.
    pub speaker_name: String,
    /// The text, with the shared image's caption appended when there is one.
    pub text: String,
    /// Session number (1-based).
    pub session: usize,
}

/// One session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Session number (1-based).
    pub number: usize,
    /// Its time as written in the data (`4:04 pm on 20 January, 2023`).
    pub date_time: String,
    /// Indexes into [`Conversation::turns`].
    pub turns: Vec<usize>,
}

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Position in the file's `qa` list.
    pub index: usize,
    /// The question.
    pub text: String,
    /// Its answer as text (`adversarial_answer` for category 5; numbers as written).
    pub answer: String,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Evidence turns (indexes into [`Conversation::turns`]), normalised, deduplicated.
    pub evidence: Vec<usize>,
    /// Evidence ids in the file that name no turn.
    pub evidence_dropped: Vec<String>,
}

/// One conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The file stem (`30`).
    pub id: String,
    /// `speaker_a`.
    pub speaker_a: String,
    /// `speaker_b`.
    pub speaker_b: String,
    /// Sessions in order.
    pub sessions: Vec<Session>,
    /// Every turn, in dialogue order.
    pub turns: Vec<Turn>,
    /// Every question.
    pub questions: Vec<Question>,
}

impl Conversation {
    /// The session a turn belongs to.
    pub fn session_of(&self, turn: usize) -> Option<&Session> {
        let n = self.turns.get(turn)?.session;
        self.sessions.iter().find(|s| s.number == n)
    }

    /// A turn's text as stored: `(date) speaker: text`.
    pub fn stored_text(&self, turn: usize) -> Option<String> {
        let t = self.turns.get(turn)?;
        let date = self.session_of(turn).map_or("", |s| s.date_time.as_str());
        Some(format!("({date}) {}: {}", t.speaker_name, t.text))
    }

    /// The name of a speaker.
    pub fn name(&self, s: Speaker) -> &str {
        match s {
            Speaker::A => &self.speaker_a,
            Speaker::B => &self.speaker_b,
        }
    }
}

fn invalid(path: &Path, what: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("{}: {what}", path.display()))
}

/// The path of conversation `id` in `dir`.
pub fn conversation_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

/// Read conversation `id` from `dir`.
pub fn load(dir: &Path, id: &str) -> Result<Conversation, BenchError> {
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(BenchError::Invalid(format!("conversation id {id:?}: letters, digits, - and _ only")));
    }
    let path = conversation_path(dir, id);
    let meta = std::fs::metadata(&path).map_err(|e| invalid(&path, e))?;
    if meta.len() > FILE_BYTES_MAX {
        return Err(invalid(&path, format!("{} bytes; the limit is {FILE_BYTES_MAX}", meta.len())));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| invalid(&path, e))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| invalid(&path, e))?;
    parse(id, &v).map_err(|e| invalid(&path, e))
}

/// Normalise one evidence entry into turn ids (`"D8:6; D9:17"` is two, `"D:11:26"` is `D11:26`).
pub fn normalise_evidence(raw: &str) -> Vec<String> {
    raw.split([';', ','])
        .map(|s| s.trim().replace(' ', ""))
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix("D:") {
            Some(rest) => format!("D{rest}"),
            None => s,
        })
        .collect()
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parse one conversation's JSON.
pub fn parse(id: &str, v: &Value) -> Result<Conversation, String> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| format!("no {k}"));
    let speaker_a = s("speaker_a")?;
    let speaker_b = s("speaker_b")?;
    if speaker_a == speaker_b {
        return Err(format!("both speakers are {speaker_a:?}"));
    }
    let mut sessions = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for n in 1..=SESSIONS_MAX {
        let Some(list) = v.get(format!("session_{n}")).and_then(Value::as_array) else { continue };
        let date_time = v.get(format!("session_{n}_date_time")).and_then(Value::as_str).unwrap_or("").to_owned();
        let mut idx = Vec::with_capacity(list.len());
        for t in list {
            if turns.len() >= TURNS_MAX {
                return Err(format!("more than {TURNS_MAX} turns"));
            }
            let name = t.get("speaker").and_then(Value::as_str).ok_or("a turn without a speaker")?;
            let speaker = if name == speaker_a {
                Speaker::A
            } else if name == speaker_b {
                Speaker::B
            } else {
                return Err(format!("turn by {name:?}, neither speaker"));
            };
            let dia_id = t.get("dia_id").and_then(Value::as_str).ok_or("a turn without a dia_id")?.to_owned();
            let mut text = t.get("text").and_then(Value::as_str).unwrap_or("").trim().to_owned();
            if let Some(c) = t.get("blip_caption").and_then(Value::as_str).map(str::trim).filter(|c| !c.is_empty()) {
                text = if text.is_empty() { format!("[shared a photo: {c}]") } else { format!("{text} [shared a photo: {c}]") };
            }
            if text.is_empty() {
                continue;
            }
            idx.push(turns.len());
            turns.push(Turn { dia_id, speaker, speaker_name: name.to_owned(), text, session: n });
        }
        sessions.push(Session { number: n, date_time, turns: idx });
    }
    if turns.is_empty() {
        return Err("no turns".into());
    }
    let mut seen = HashSet::new();
    if let Some(dup) = turns.iter().find(|t| !seen.insert(t.dia_id.clone())) {
        return Err(format!("dia_id {} appears twice", dup.dia_id));
    }
    let by_id: std::collections::HashMap<&str, usize> = turns.iter().enumerate().map(|(i, t)| (t.dia_id.as_str(), i)).collect();
    let qa = v.get("qa").and_then(Value::as_array).ok_or("no qa")?;
    if qa.len() > QUESTIONS_MAX {
        return Err(format!("{} questions; the limit is {QUESTIONS_MAX}", qa.len()));
    }
    let mut questions = Vec::with_capacity(qa.len());
    for (index, q) in qa.iter().enumerate() {
        let text = q.get("question").and_then(Value::as_str).ok_or("a question without text")?.trim().to_owned();
        let category = q.get("category").and_then(Value::as_u64).filter(|c| (1..=5).contains(c)).ok_or("a question without a category 1-5")? as u8;
        let answer = q.get("answer").or_else(|| q.get("adversarial_answer")).and_then(scalar_text).unwrap_or_default();
        let mut evidence = Vec::new();
        let mut evidence_dropped = Vec::new();
        for raw in q.get("evidence").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let Some(raw) = raw.as_str() else { continue };
            for e in normalise_evidence(raw) {
                match by_id.get(e.as_str()) {
                    Some(&t) if !evidence.contains(&t) => evidence.push(t),
                    Some(_) => {}
                    None => evidence_dropped.push(e),
                }
            }
        }
        if text.is_empty() {
            continue;
        }
        questions.push(Question { index, text, answer, category, evidence, evidence_dropped });
    }
    Ok(Conversation { id: id.to_owned(), speaker_a, speaker_b, sessions, turns, questions })
}
