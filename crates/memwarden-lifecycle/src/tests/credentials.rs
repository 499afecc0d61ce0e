//! Credential detection: every kind is found, reported by kind and offsets, never echoed.
//! Secrets are assembled at run time so no secret-shaped literal sits in the source.

use super::*;

fn alnum(n: usize) -> String {
    "aB3dE5gH7jK9mN1pQ2sT4vW6xY8z0C".chars().cycle().take(n).collect()
}
fn upper(n: usize) -> String {
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".chars().cycle().take(n).collect()
}

/// (kind, secret) pairs, each a plausible shape of its kind.
fn secrets() -> Vec<(CredentialKind, String)> {
    let pem_body = alnum(64);
    vec![
        (
            CredentialKind::PemPrivateKey,
            format!("-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"),
        ),
        (CredentialKind::PemPrivateKey, format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{pem_body}")),
        (CredentialKind::BearerToken, format!("Bearer {}", alnum(40))),
        (CredentialKind::AwsAccessKeyId, format!("AKIA{}", upper(16))),
        (CredentialKind::AwsSecretAccessKey, format!("aws_secret_access_key = {}", alnum(40))),
        (CredentialKind::GcpApiKey, format!("AIza{}", alnum(35))),
        (CredentialKind::GcpOauthToken, format!("ya29.{}", alnum(40))),
        (CredentialKind::GcpServiceAccount, r#"{"type": "service_account", "project_id": "x"}"#.to_owned()),
        (CredentialKind::GithubToken, format!("ghp_{}", alnum(36))),
        (CredentialKind::GithubToken, format!("github_pat_{}", alnum(40))),
        (CredentialKind::OpenaiKey, format!("sk-proj-{}", alnum(48))),
        (CredentialKind::OpenaiKey, format!("sk-{}", alnum(48))),
        (CredentialKind::AnthropicKey, format!("sk-ant-api03-{}", alnum(48))),
        (CredentialKind::SlackToken, format!("xoxb-{}-{}", "1234567890", alnum(24))),
        (CredentialKind::StripeKey, format!("sk_live_{}", alnum(24))),
        (CredentialKind::Jwt, format!("eyJ{}.eyJ{}.{}", alnum(16), alnum(24), alnum(32))),
    ]
}

#[test]
fn every_secret_shape_is_rejected_by_kind_without_echo() {
    let s = scorer();
    for (kind, secret) in secrets() {
        let text = format!("Deployment note: use {secret} for the staging job.");
        let m = mem(&text);
        let d = write_gate(s, &m);
        assert_eq!(d.outcome, WriteOutcome::Reject, "{kind:?}");
        assert_eq!(d.rule, WriteRule::Credential, "{kind:?}");
        let f = d
            .credentials
            .iter()
            .find(|f| f.kind == kind)
            .unwrap_or_else(|| panic!("{kind:?} not found: {:?}", d.credentials));
        // The offsets point into the secret ...
        let start = text.find(secret.as_str()).unwrap();
        // (an unterminated PEM block runs to the end of the text, so only the start is pinned)
        assert!(f.start >= start && f.start < start + secret.len() && f.start < f.end, "{kind:?}: {f:?}");
        // ... and neither the decision's Debug nor its JSON carries any of it.
        let debug = format!("{d:?}");
        let json = serde_json::to_string(&d).unwrap();
        let matched = &text[f.start..f.end];
        let tail: String = secret.chars().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        for needle in [secret.as_str(), matched, tail.as_str()] {
            assert!(!debug.contains(needle), "{kind:?}: Debug echoes {needle:?}");
            assert!(!json.contains(needle), "{kind:?}: JSON echoes {needle:?}");
        }
    }
}

#[test]
fn credential_keywords_follow_the_paper_with_word_boundaries() {
    let s = scorer();
    let cases: Vec<(&str, usize)> = vec![
        ("my password is hunter2", 1),
        ("store the API key and the api_key", 2),
        ("credentials and secrets", 2),
        ("use the calibration token", 1),
        ("a secretary uses a tokenizer", 0),
        ("plain note", 0),
    ];
    for (text, n) in cases {
        let found = s.find_credentials(text);
        assert_eq!(found.len(), n, "{text:?}: {found:?}");
        assert!(found.iter().all(|f| f.kind == CredentialKind::Keyword));
        let d = write_gate(s, &mem(text));
        if n > 0 {
            assert_eq!((d.outcome, d.rule), (WriteOutcome::Reject, WriteRule::Credential), "{text:?}");
            assert!(!format!("{d:?}").contains("hunter2"));
        } else {
            assert_ne!(d.outcome, WriteOutcome::Reject, "{text:?}");
        }
    }
    let f = &s.find_credentials("my password is hunter2")[0];
    assert_eq!((f.start, f.end), (3, 11));
}

#[test]
fn one_finding_per_span_and_a_cap_on_findings() {
    let s = scorer();
    // The Anthropic key also fits the generic sk- shape: reported once, as the specific kind.
    let key = format!("sk-ant-api03-{}", alnum(48));
    let found = s.find_credentials(&key);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, CredentialKind::AnthropicKey);
    // A secret assignment keyword inside the AWS secret shape is not reported twice.
    let aws = format!("aws_secret_access_key={}", alnum(40));
    assert_eq!(s.find_credentials(&aws).len(), 1);
    let many = "password ".repeat(40);
    assert_eq!(s.find_credentials(&many).len(), s.config().limits.credential_findings_max);
}
