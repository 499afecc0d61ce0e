//! Credential detection for the write gate's first rule. A finding says *what kind* of
//! credential was found and *where* (byte offsets into the scored text), never the secret text.

use crate::risk::RiskScorer;
use crate::rules::CredentialKind;
use serde::{Deserialize, Serialize};

/// One credential found in a text. Holds no part of the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialFinding {
    /// What kind of credential.
    pub kind: CredentialKind,
    /// The rule that matched (a name from the rule set, e.g. `aws_access_key_id`).
    pub rule: String,
    /// Byte offset of the match start in the scored text.
    pub start: usize,
    /// Byte offset one past the match end.
    pub end: usize,
}

impl RiskScorer {
    /// Scan a text for credentials: secret shapes first (the more specific findings), then (under
    /// the paper's rules only) the paper's keywords. At most `limits.credential_findings_max` findings, ordered by position.
    /// The caller must check the text size first (the gates do).
    pub fn find_credentials(&self, text: &str) -> Vec<CredentialFinding> {
        let max = self.config().limits.credential_findings_max;
        let rules = self.rules();
        let mut out: Vec<CredentialFinding> = Vec::new();
        'shapes: for (re, kind, name) in &rules.secret_shapes {
            for m in re.find_iter(text) {
                if out.len() >= max {
                    break 'shapes;
                }
                // One finding per span: the first (more specific) shape wins.
                if out.iter().any(|f| m.start() < f.end && f.start < m.end()) {
                    continue;
                }
                out.push(CredentialFinding { kind: *kind, rule: name.clone(), start: m.start(), end: m.end() });
            }
        }
        // The paper's keywords ("password", "API key") flag prose about credentials as well as
        // credentials; the product refuses secrets by their shape alone.
        let keywords = self.config().mode == crate::config::RuleMode::Paper;
        'keywords: for (re, name) in rules.credential_keywords.iter().zip(&rules.credential_keyword_names) {
            if !keywords {
                break;
            }
            for m in re.find_iter(text) {
                if out.len() >= max {
                    break 'keywords;
                }
                // A keyword inside an already reported secret adds nothing.
                if out.iter().any(|f| m.start() < f.end && f.start < m.end()) {
                    continue;
                }
                out.push(CredentialFinding {
                    kind: CredentialKind::Keyword,
                    rule: name.clone(),
                    start: m.start(),
                    end: m.end(),
                });
            }
        }
        out.sort_by_key(|f| (f.start, f.end));
        out
    }
}
