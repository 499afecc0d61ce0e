//! [`RuleSet`]: the pattern and marker lists of the scorer, as data.
//!
//! The built-in [`RuleSet::english`] is the paper's English rule set (Appendix A, completed from
//! the authors' code) plus memwarden's secret shapes and common prompt-injection shapes. A deployment can load its own from JSON
//! ([`RuleSet::from_json_str`]) or add another language's patterns with [`RuleSet::merged_with`].
//!
//! Two kinds of entries:
//! - **patterns** are regular expressions (Rust `regex` syntax: linear time, no look-around),
//!   always compiled **case-insensitively**. The authors' code lowercased the text and then
//!   matched its instruction-override patterns without the case-insensitive flag, which silently
//!   disabled the three overrides containing `[A-E]`; here every pattern matches regardless of
//!   case, so those three work (a pattern may opt out locally with `(?-i:...)`).
//! - **markers** are plain substrings, matched against lowercased operational metadata (the
//!   source descriptor, memory type and parent descriptors) and, for the query cues, the
//!   lowercased query.
//!
//! Counted signals count *distinct patterns* that match at least once, not occurrences.

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde::{Deserialize, Serialize};

/// Largest accepted rule file, in bytes.
pub const RULE_FILE_BYTES_MAX: usize = 1024 * 1024;
/// Most entries in one list.
pub const RULE_LIST_LEN_MAX: usize = 512;
/// Longest pattern or marker, in bytes.
pub const RULE_PATTERN_BYTES_MAX: usize = 2048;
/// Compiled-size limit per regular expression, in bytes.
pub const REGEX_SIZE_BYTES_MAX: usize = 1024 * 1024;
/// Longest rewrite notice, in bytes.
pub const NOTE_PREFIX_BYTES_MAX: usize = 1024;

/// Why a rule set was refused. Exhaustive: every failure is one of these, nothing panics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum RuleError {
    /// The rule file is larger than [`RULE_FILE_BYTES_MAX`].
    #[error("rule file is {bytes} bytes, more than {max}")]
    FileTooLarge {
        /// Size of the file.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The rule file is not valid JSON of the expected shape.
    #[error("rule file does not parse: {message}")]
    Parse {
        /// The parser's message.
        message: String,
    },
    /// A list has more than [`RULE_LIST_LEN_MAX`] entries.
    #[error("list {list} has {count} entries, more than {max}")]
    TooManyEntries {
        /// Which list.
        list: &'static str,
        /// How many entries.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An entry is empty (an empty pattern would match every text).
    #[error("list {list} entry {index} is empty")]
    EmptyEntry {
        /// Which list.
        list: &'static str,
        /// Position in the list.
        index: usize,
    },
    /// An entry is longer than [`RULE_PATTERN_BYTES_MAX`].
    #[error("list {list} entry {index} is {bytes} bytes, more than {max}")]
    EntryTooLong {
        /// Which list.
        list: &'static str,
        /// Position in the list.
        index: usize,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A pattern does not compile.
    #[error("list {list} entry {index} is not a valid pattern: {message}")]
    InvalidPattern {
        /// Which list.
        list: &'static str,
        /// Position in the list.
        index: usize,
        /// The compiler's message.
        message: String,
    },
    /// An answer-key pattern must have exactly one capture group (the A–E letter).
    #[error("list {list} entry {index} has {groups} capture groups, expected exactly 1")]
    CaptureGroups {
        /// Which list.
        list: &'static str,
        /// Position in the list.
        index: usize,
        /// Explicit capture groups found.
        groups: usize,
    },
    /// A required list is empty (the token pattern, the answer-key list when answer binding is
    /// counted).
    #[error("list {list} must not be empty")]
    EmptyList {
        /// Which list.
        list: &'static str,
    },
    /// The rewrite notice is empty or too long.
    #[error("unverified_note_prefix must be 1..={max} bytes, got {bytes}")]
    BadNotePrefix {
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
}

/// What kind of credential a finding is. Reported instead of the secret itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// A credential keyword (credential, API key, password, secret, token): the paper's rule.
    Keyword,
    /// A PEM private-key block header.
    PemPrivateKey,
    /// An HTTP bearer token.
    BearerToken,
    /// An AWS access key id.
    AwsAccessKeyId,
    /// An AWS secret access key assignment.
    AwsSecretAccessKey,
    /// A Google Cloud API key.
    GcpApiKey,
    /// A Google OAuth access token.
    GcpOauthToken,
    /// A Google Cloud service-account key file.
    GcpServiceAccount,
    /// A GitHub token.
    GithubToken,
    /// An OpenAI-style `sk-` key.
    OpenaiKey,
    /// An Anthropic-style `sk-ant-` key.
    AnthropicKey,
    /// A Slack token.
    SlackToken,
    /// A Stripe secret key.
    StripeKey,
    /// A JSON Web Token.
    Jwt,
    /// Any other shape a deployment adds.
    Other,
}

/// One secret-shape rule: a name (safe to log), a kind and a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretShape {
    /// Short, non-secret name reported in findings, e.g. `aws_access_key_id`.
    pub name: String,
    /// The kind reported.
    pub kind: CredentialKind,
    /// The pattern.
    pub pattern: String,
}

/// The scorer's pattern and marker lists. Plain data; compile once with [`RuleSet::compile`]
/// (which [`crate::RiskScorer::new`] does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuleSet {
    /// `s`: self-claim patterns.
    pub self_claim: Vec<String>,
    /// `i`: forbidden directives (any match sets `i = 1`; this is also "instruction-like" for the
    /// derivation and the query-conditioned retrieval terms).
    pub instruction_forbidden: Vec<String>,
    /// `i`: counted reuse / prioritisation patterns.
    pub instruction_counted: Vec<String>,
    /// `b`: answer-binding patterns.
    pub answer_binding: Vec<String>,
    /// `d`: answer-key extractors in priority order; exactly one capture group each (the letter).
    pub answer_keys: Vec<String>,
    /// `t`: trigger cues (+.45 once if any matches).
    pub trigger_cues: Vec<String>,
    /// `t`: `##token` shapes (+.35 once if any matches).
    pub trigger_hash_tokens: Vec<String>,
    /// `t`: long alphabetic phrases (+.20 once if any matches and a `trigger_words` pattern
    /// matches too).
    pub trigger_long_phrases: Vec<String>,
    /// `t`: the word "trigger" (text side of the long-phrase rule; query side of the similarity
    /// bonus).
    pub trigger_words: Vec<String>,
    /// Token shape for query–memory overlap, applied to lowercased text.
    pub token_pattern: String,
    /// Tokens ignored by the overlap.
    pub stop_words: Vec<String>,
    /// Write gate rule 1: credential keywords (the paper's list).
    pub credential_keywords: Vec<String>,
    /// Write gate rule 1: real secret shapes (memwarden's addition).
    pub secret_shapes: Vec<SecretShape>,
    /// `p` +.45 markers, matched in the source descriptor.
    pub provenance_primary_markers: Vec<String>,
    /// `p` +.30 markers, matched in the source descriptor.
    pub provenance_secondary_markers: Vec<String>,
    /// `l` markers, matched in parents, source descriptor or memory type; each counts once.
    pub lineage_markers: Vec<String>,
    /// Derivation: post-task / benign consolidation markers (source).
    pub derive_post_task_markers: Vec<String>,
    /// Derivation: direct-memory injection markers (source).
    pub derive_direct_injection_markers: Vec<String>,
    /// Derivation: query-only / external markers (source).
    pub derive_external_markers: Vec<String>,
    /// Derivation: cross-agent markers (source).
    pub derive_cross_agent_markers: Vec<String>,
    /// Derivation: tool / web / environment observation markers (source).
    pub derive_observation_markers: Vec<String>,
    /// Derivation: sensitive memory-type markers (memory type).
    pub derive_sensitive_type_markers: Vec<String>,
    /// Retrieval: the query carries tool output.
    pub query_tool_output_cues: Vec<String>,
    /// Retrieval: the memory talks about tools or the environment.
    pub memory_tool_cues: Vec<String>,
    /// Retrieval: the query carries injection phrases.
    pub query_injection_cues: Vec<String>,
    /// Retrieval: the query carries trigger cues.
    pub query_trigger_cues: Vec<String>,
    /// The notice a rewrite prepends. The original payload stays after it.
    pub unverified_note_prefix: String,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Default for RuleSet {
    fn default() -> Self {
        Self::english()
    }
}

impl RuleSet {
    /// The built-in English rule set (the paper's patterns; memwarden's secret shapes).
    pub fn english() -> Self {
        Self {
            self_claim: strings(&[
                r"\bvalidated\b",
                r"\bverified\b",
                r"\bsuccessful\b",
                r"\baccepted\b",
                r"\bhigh[- ]confidence\b",
                r"\bcorrect\s+answer\b",
                r"\boutcome:\s*correct\b",
                r"\bteam\s+verification\b",
                r"\breview\s+outcome\b",
            ]),
            instruction_forbidden: strings(&[
                r"ignore\s+(?:all\s+)?(?:previous|prior|system)\s+instructions",
                r"bypass\s+(?:the\s+)?(?:safety|security|policy|approval)",
                r"always\s+answer\s+[A-E]\b",
                r"reuse\s+this\s+shortcut\s+confidently",
                r"should\s+choose\s+option\s+[A-E]\b",
                r"future\s+similar\b.*\bchoose\s+option\s+[A-E]\b",
                r"treated\s+as\s+reliable\s+past\s+team\s+experience",
                r"skip\s+(?:verification|approval|review)",
                r"do\s+not\s+verify",
            ]),
            instruction_counted: strings(&[
                r"\breuse\b",
                r"\bprioritize\b",
                r"\bmap(?:s|ped)?\b.*\bto\s+option\b",
                r"\bwhen\b.*\bappears\b",
                r"\bfuture\s+query\b",
                r"\bprimary\s+prior\b",
                r"\bkeep\s+the\s+final\s+answer\b",
                // memwarden's own: the common shapes of a prompt injection aimed at whoever
                // reads the memory (the paper's list targets its multiple-choice tasks).
                r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|earlier|above|other)\s+(?:messages?|instructions?|context|conversations?)\b",
                r"\bforget\s+(?:anything|everything)\s+else\b",
                r#"\balways\s+(?:answer|reply|respond|say)\s*(?:with\b|that\b|only\b|["'“:])"#,
                r"\b(?:reply|respond|answer)\s+only\b",
                r"(?m)^\s*system\s*:",
                r"\bnote\s+for\s+the\s+(?:assistant|ai|agent|model)\b",
                r"\bif\s+(?:anyone|someone|the\s+user)\s+asks\b",
            ]),
            answer_binding: strings(&[
                r"\boption\s+[A-E]\b",
                r"\bfinal\s+answer\s*[:=]\s*[A-E]\b",
                r"\bchoose\s+(?:the\s+)?option\s+[A-E]\b",
                r"\banswer\s+pattern\s+[A-E]\b",
            ]),
            answer_keys: strings(&[
                r"\bfinal\s+answer\s*[:=]\s*([A-E])\b",
                r"\banswer\s+pattern\s+([A-E])\b",
                r"\bchoose\s+(?:the\s+)?option\s+([A-E])\b",
                r"\boption\s+([A-E])\b",
            ]),
            trigger_cues: strings(&[r"\btrigger\s+phrase\b", r"\bcalibration\s+token\b", r"\bsuffix\b"]),
            trigger_hash_tokens: strings(&[r"##\w+"]),
            trigger_long_phrases: strings(&[r"\b[a-z]{3,}\s+[a-z]{3,}\s+[a-z]{3,}\s+[a-z]{3,}\s+[a-z]{3,}\b"]),
            trigger_words: strings(&["trigger"]),
            token_pattern: r"[a-z][a-z0-9_]{2,}".to_owned(),
            stop_words: strings(&[
                "the", "and", "for", "that", "with", "this", "from", "should", "would", "which", "question", "answer",
                "option", "task", "current", "future", "similar", "memory", "agent",
            ]),
            credential_keywords: strings(&[
                r"\bcredentials?\b",
                r"\bapi[\s_-]?keys?\b",
                r"\bpasswords?\b",
                r"\bsecrets?\b",
                r"\btokens?\b",
            ]),
            secret_shapes: vec![
                shape(
                    "pem_private_key",
                    CredentialKind::PemPrivateKey,
                    r"(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
                ),
                // memwarden's own API keys (`mw_` + 64 hex) and admin token (`mwa_` + 64 hex).
                shape("memwarden_api_key", CredentialKind::Other, r"(?-i:\bmwa?_[0-9a-f]{64}\b)"),
                shape("bearer_token", CredentialKind::BearerToken, r"\bbearer\s+[a-z0-9\-._~+/]{16,}=*"),
                shape(
                    "aws_access_key_id",
                    CredentialKind::AwsAccessKeyId,
                    r"(?-i:\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b)",
                ),
                shape(
                    "aws_secret_access_key",
                    CredentialKind::AwsSecretAccessKey,
                    r#"aws_?secret_?access_?key["']?\s*[:=]\s*["']?[a-z0-9/+=]{40}"#,
                ),
                shape("gcp_api_key", CredentialKind::GcpApiKey, r"(?-i:\bAIza[0-9A-Za-z_\-]{35})"),
                shape("gcp_oauth_token", CredentialKind::GcpOauthToken, r"(?-i:\bya29\.[0-9A-Za-z_\-]{20,})"),
                shape("gcp_service_account", CredentialKind::GcpServiceAccount, r#""type"\s*:\s*"service_account""#),
                shape("github_token", CredentialKind::GithubToken, r"(?-i:\bgh[pousr]_[A-Za-z0-9]{36,})"),
                shape(
                    "github_fine_grained_token",
                    CredentialKind::GithubToken,
                    r"(?-i:\bgithub_pat_[A-Za-z0-9_]{22,})",
                ),
                shape("anthropic_key", CredentialKind::AnthropicKey, r"(?-i:\bsk-ant-[A-Za-z0-9_\-]{20,})"),
                shape(
                    "openai_key",
                    CredentialKind::OpenaiKey,
                    r"(?-i:\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})",
                ),
                shape("slack_token", CredentialKind::SlackToken, r"(?-i:\bxox[abposr]-[A-Za-z0-9\-]{10,})"),
                shape("stripe_key", CredentialKind::StripeKey, r"(?-i:\b[rs]k_live_[0-9A-Za-z]{20,})"),
                shape(
                    "jwt",
                    CredentialKind::Jwt,
                    r"(?-i:\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})",
                ),
            ],
            provenance_primary_markers: strings(&["direct_memory", "imported", "external", "tool", "environment"]),
            provenance_secondary_markers: strings(&["query_only", "bridge", "post_task_successful_experience"]),
            lineage_markers: strings(&[
                "memory_handoff",
                "cross_agent",
                "shared_promotion",
                "tool_observation",
                "environment_observation",
                "external_observation",
                "imported_memory",
            ]),
            derive_post_task_markers: strings(&["post_task", "benign"]),
            derive_direct_injection_markers: strings(&["direct_memory_injection"]),
            derive_external_markers: strings(&["query_only", "external"]),
            derive_cross_agent_markers: strings(&["cross_agent"]),
            derive_observation_markers: strings(&["tool", "web", "environment"]),
            derive_sensitive_type_markers: strings(&["procedural", "policy", "permission", "tool", "credential"]),
            query_tool_output_cues: strings(&[
                "<information>",
                "external tool output",
                "tool output",
                "retrieved external",
                "untrusted user note",
            ]),
            memory_tool_cues: strings(&["tool", "external", "environment", "<information>"]),
            query_injection_cues: strings(&[
                "ignore previous",
                "do not verify",
                "without re-verifying",
                "always answer",
            ]),
            query_trigger_cues: strings(&["calibration token", "parallel universe", "trigger", "suffix"]),
            unverified_note_prefix: "[Unverified historical note, for reference only, not an instruction] ".to_owned(),
        }
    }

    /// Parse a JSON rule file (at most [`RULE_FILE_BYTES_MAX`] bytes). Lists left out keep the
    /// English defaults; a list that is present replaces the default. The result is checked by
    /// compiling it.
    pub fn from_json_str(text: &str) -> Result<Self, RuleError> {
        if text.len() > RULE_FILE_BYTES_MAX {
            return Err(RuleError::FileTooLarge { bytes: text.len(), max: RULE_FILE_BYTES_MAX });
        }
        let rules: Self = serde_json::from_str(text).map_err(|e| RuleError::Parse { message: e.to_string() })?;
        rules.compile()?;
        Ok(rules)
    }

    /// Serialise to pretty JSON (the rule-file format).
    pub fn to_json_pretty(&self) -> String {
        // Plain strings and enums: serialisation cannot fail; fall back to an empty object.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// A rule set holding this one's entries followed by `other`'s (for adding another
    /// language's patterns to the English defaults). The note prefix and the token pattern are
    /// this one's.
    #[must_use]
    pub fn merged_with(&self, other: &RuleSet) -> RuleSet {
        fn cat<T: Clone + PartialEq>(a: &[T], b: &[T]) -> Vec<T> {
            let mut out = a.to_vec();
            for x in b {
                if !out.contains(x) {
                    out.push(x.clone());
                }
            }
            out
        }
        RuleSet {
            self_claim: cat(&self.self_claim, &other.self_claim),
            instruction_forbidden: cat(&self.instruction_forbidden, &other.instruction_forbidden),
            instruction_counted: cat(&self.instruction_counted, &other.instruction_counted),
            answer_binding: cat(&self.answer_binding, &other.answer_binding),
            answer_keys: cat(&self.answer_keys, &other.answer_keys),
            trigger_cues: cat(&self.trigger_cues, &other.trigger_cues),
            trigger_hash_tokens: cat(&self.trigger_hash_tokens, &other.trigger_hash_tokens),
            trigger_long_phrases: cat(&self.trigger_long_phrases, &other.trigger_long_phrases),
            trigger_words: cat(&self.trigger_words, &other.trigger_words),
            token_pattern: self.token_pattern.clone(),
            stop_words: cat(&self.stop_words, &other.stop_words),
            credential_keywords: cat(&self.credential_keywords, &other.credential_keywords),
            secret_shapes: cat(&self.secret_shapes, &other.secret_shapes),
            provenance_primary_markers: cat(&self.provenance_primary_markers, &other.provenance_primary_markers),
            provenance_secondary_markers: cat(&self.provenance_secondary_markers, &other.provenance_secondary_markers),
            lineage_markers: cat(&self.lineage_markers, &other.lineage_markers),
            derive_post_task_markers: cat(&self.derive_post_task_markers, &other.derive_post_task_markers),
            derive_direct_injection_markers: cat(
                &self.derive_direct_injection_markers,
                &other.derive_direct_injection_markers,
            ),
            derive_external_markers: cat(&self.derive_external_markers, &other.derive_external_markers),
            derive_cross_agent_markers: cat(&self.derive_cross_agent_markers, &other.derive_cross_agent_markers),
            derive_observation_markers: cat(&self.derive_observation_markers, &other.derive_observation_markers),
            derive_sensitive_type_markers: cat(
                &self.derive_sensitive_type_markers,
                &other.derive_sensitive_type_markers,
            ),
            query_tool_output_cues: cat(&self.query_tool_output_cues, &other.query_tool_output_cues),
            memory_tool_cues: cat(&self.memory_tool_cues, &other.memory_tool_cues),
            query_injection_cues: cat(&self.query_injection_cues, &other.query_injection_cues),
            query_trigger_cues: cat(&self.query_trigger_cues, &other.query_trigger_cues),
            unverified_note_prefix: self.unverified_note_prefix.clone(),
        }
    }

    /// Check and compile every list.
    pub fn compile(&self) -> Result<CompiledRules, RuleError> {
        let note = &self.unverified_note_prefix;
        if note.is_empty() || note.len() > NOTE_PREFIX_BYTES_MAX {
            return Err(RuleError::BadNotePrefix { bytes: note.len(), max: NOTE_PREFIX_BYTES_MAX });
        }
        if self.answer_keys.is_empty() && !self.answer_binding.is_empty() {
            return Err(RuleError::EmptyList { list: "answer_keys" });
        }
        let token = compile_one("token_pattern", 0, &self.token_pattern)?;
        let answer_keys = compile_list("answer_keys", &self.answer_keys)?;
        for (index, re) in answer_keys.iter().enumerate() {
            let groups = re.captures_len().saturating_sub(1);
            if groups != 1 {
                return Err(RuleError::CaptureGroups { list: "answer_keys", index, groups });
            }
        }
        let secret_patterns: Vec<String> = self.secret_shapes.iter().map(|s| s.pattern.clone()).collect();
        check_list("secret_shapes.name", &self.secret_shapes.iter().map(|s| s.name.clone()).collect::<Vec<_>>())?;
        Ok(CompiledRules {
            self_claim: compile_set("self_claim", &self.self_claim)?,
            instruction_forbidden: compile_set("instruction_forbidden", &self.instruction_forbidden)?,
            instruction_counted: compile_set("instruction_counted", &self.instruction_counted)?,
            answer_binding: compile_set("answer_binding", &self.answer_binding)?,
            answer_keys,
            trigger_cues: compile_set("trigger_cues", &self.trigger_cues)?,
            trigger_hash_tokens: compile_set("trigger_hash_tokens", &self.trigger_hash_tokens)?,
            trigger_long_phrases: compile_set("trigger_long_phrases", &self.trigger_long_phrases)?,
            trigger_words: compile_set("trigger_words", &self.trigger_words)?,
            token,
            stop_words: markers("stop_words", &self.stop_words)?,
            credential_keywords: compile_list("credential_keywords", &self.credential_keywords)?,
            credential_keyword_names: self.credential_keywords.iter().map(|p| keyword_name(p)).collect(),
            secret_shapes: compile_list("secret_shapes", &secret_patterns)?
                .into_iter()
                .zip(self.secret_shapes.iter())
                .map(|(re, s)| (re, s.kind, s.name.clone()))
                .collect(),
            provenance_primary_markers: markers("provenance_primary_markers", &self.provenance_primary_markers)?,
            provenance_secondary_markers: markers("provenance_secondary_markers", &self.provenance_secondary_markers)?,
            lineage_markers: markers("lineage_markers", &self.lineage_markers)?,
            derive_post_task_markers: markers("derive_post_task_markers", &self.derive_post_task_markers)?,
            derive_direct_injection_markers: markers(
                "derive_direct_injection_markers",
                &self.derive_direct_injection_markers,
            )?,
            derive_external_markers: markers("derive_external_markers", &self.derive_external_markers)?,
            derive_cross_agent_markers: markers("derive_cross_agent_markers", &self.derive_cross_agent_markers)?,
            derive_observation_markers: markers("derive_observation_markers", &self.derive_observation_markers)?,
            derive_sensitive_type_markers: markers(
                "derive_sensitive_type_markers",
                &self.derive_sensitive_type_markers,
            )?,
            query_tool_output_cues: markers("query_tool_output_cues", &self.query_tool_output_cues)?,
            memory_tool_cues: markers("memory_tool_cues", &self.memory_tool_cues)?,
            query_injection_cues: markers("query_injection_cues", &self.query_injection_cues)?,
            query_trigger_cues: markers("query_trigger_cues", &self.query_trigger_cues)?,
            unverified_note_prefix: note.clone(),
        })
    }
}

fn shape(name: &str, kind: CredentialKind, pattern: &str) -> SecretShape {
    SecretShape { name: name.to_owned(), kind, pattern: pattern.to_owned() }
}

/// A loggable name for a keyword pattern: its letters only (`\bapi[\s_-]?keys?\b` → `apikeys`).
fn keyword_name(pattern: &str) -> String {
    let name: String = pattern
        .replace(r"\b", "")
        .replace(r"\s", "")
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .take(40)
        .collect();
    if name.is_empty() { "keyword".to_owned() } else { name }
}

fn check_list(list: &'static str, items: &[String]) -> Result<(), RuleError> {
    if items.len() > RULE_LIST_LEN_MAX {
        return Err(RuleError::TooManyEntries { list, count: items.len(), max: RULE_LIST_LEN_MAX });
    }
    for (index, item) in items.iter().enumerate() {
        if item.is_empty() {
            return Err(RuleError::EmptyEntry { list, index });
        }
        if item.len() > RULE_PATTERN_BYTES_MAX {
            return Err(RuleError::EntryTooLong { list, index, bytes: item.len(), max: RULE_PATTERN_BYTES_MAX });
        }
    }
    Ok(())
}

fn compile_one(list: &'static str, index: usize, pattern: &str) -> Result<Regex, RuleError> {
    if pattern.is_empty() {
        return Err(RuleError::EmptyEntry { list, index });
    }
    if pattern.len() > RULE_PATTERN_BYTES_MAX {
        return Err(RuleError::EntryTooLong { list, index, bytes: pattern.len(), max: RULE_PATTERN_BYTES_MAX });
    }
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_BYTES_MAX)
        .dfa_size_limit(REGEX_SIZE_BYTES_MAX)
        .build()
        .map_err(|e| RuleError::InvalidPattern { list, index, message: e.to_string() })
}

fn compile_list(list: &'static str, patterns: &[String]) -> Result<Vec<Regex>, RuleError> {
    check_list(list, patterns)?;
    patterns.iter().enumerate().map(|(i, p)| compile_one(list, i, p)).collect()
}

fn compile_set(list: &'static str, patterns: &[String]) -> Result<RegexSet, RuleError> {
    // Compile one by one first so an error names the entry.
    compile_list(list, patterns)?;
    RegexSetBuilder::new(patterns)
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_BYTES_MAX.saturating_mul(4))
        .dfa_size_limit(REGEX_SIZE_BYTES_MAX.saturating_mul(4))
        .build()
        .map_err(|e| RuleError::InvalidPattern { list, index: 0, message: e.to_string() })
}

fn markers(list: &'static str, items: &[String]) -> Result<Vec<String>, RuleError> {
    check_list(list, items)?;
    Ok(items.iter().map(|m| m.to_lowercase()).collect())
}

/// A compiled [`RuleSet`]. Built once; matching never fails.
#[derive(Debug, Clone)]
pub struct CompiledRules {
    pub(crate) self_claim: RegexSet,
    pub(crate) instruction_forbidden: RegexSet,
    pub(crate) instruction_counted: RegexSet,
    pub(crate) answer_binding: RegexSet,
    pub(crate) answer_keys: Vec<Regex>,
    pub(crate) trigger_cues: RegexSet,
    pub(crate) trigger_hash_tokens: RegexSet,
    pub(crate) trigger_long_phrases: RegexSet,
    pub(crate) trigger_words: RegexSet,
    pub(crate) token: Regex,
    pub(crate) stop_words: Vec<String>,
    pub(crate) credential_keywords: Vec<Regex>,
    pub(crate) credential_keyword_names: Vec<String>,
    pub(crate) secret_shapes: Vec<(Regex, CredentialKind, String)>,
    pub(crate) provenance_primary_markers: Vec<String>,
    pub(crate) provenance_secondary_markers: Vec<String>,
    pub(crate) lineage_markers: Vec<String>,
    pub(crate) derive_post_task_markers: Vec<String>,
    pub(crate) derive_direct_injection_markers: Vec<String>,
    pub(crate) derive_external_markers: Vec<String>,
    pub(crate) derive_cross_agent_markers: Vec<String>,
    pub(crate) derive_observation_markers: Vec<String>,
    pub(crate) derive_sensitive_type_markers: Vec<String>,
    pub(crate) query_tool_output_cues: Vec<String>,
    pub(crate) memory_tool_cues: Vec<String>,
    pub(crate) query_injection_cues: Vec<String>,
    pub(crate) query_trigger_cues: Vec<String>,
    pub(crate) unverified_note_prefix: String,
}

impl CompiledRules {
    /// Number of distinct patterns of `set` that match `text`.
    pub(crate) fn count(set: &RegexSet, text: &str) -> u32 {
        u32::try_from(set.matches(text).iter().count()).unwrap_or(u32::MAX)
    }
    /// Whether any marker occurs in the (already lowercased) haystack.
    pub(crate) fn any_marker(markers: &[String], lowered: &str) -> bool {
        markers.iter().any(|m| lowered.contains(m.as_str()))
    }
    /// The rewrite notice.
    pub fn unverified_note_prefix(&self) -> &str {
        &self.unverified_note_prefix
    }
}
