//! Fuzz every request body and MCP argument type through the strict parser the doors use.
//! The first byte picks the type, the rest is the body. Properties: no panic; an accepted body
//! has no duplicate key; an error message is short and never repeats a string of the body
//! longer than the longest name an error may quote.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memwarden_api::dto::*;
use memwarden_api::strict::{self, ECHO_NAME_BYTES_MAX, StrictJsonError};
use serde::de::DeserializeOwned;

/// Longest error message any door may answer with (the redactor stops at 1 KiB).
const MESSAGE_BYTES_MAX: usize = 1100;

fn strings_of(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings_of(x, out)
        }),
        _ => {}
    }
}

fn check_error(body: &[u8], message: &str) {
    assert!(message.len() <= MESSAGE_BYTES_MAX, "error message of {} bytes", message.len());
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let mut strings = Vec::new();
        strings_of(&v, &mut strings);
        for s in strings.iter().filter(|s| s.len() > ECHO_NAME_BYTES_MAX) {
            assert!(!message.contains(s.as_str()), "the error echoed a string of the body: {message}");
        }
    }
}

fn check<T: DeserializeOwned>(body: &[u8]) {
    match strict::from_slice::<T>(body) {
        Ok(_) => assert!(strict::check_no_duplicate_keys(body).is_ok(), "accepted a duplicate key"),
        Err(e @ StrictJsonError::DuplicateKey { .. }) => check_error(body, &e.to_string()),
        Err(e) => check_error(body, &e.to_string()),
    }
}

/// `POST /v1/memories`: strictly parsed as a value, then shaped.
fn check_add(body: &[u8]) {
    match strict::from_slice::<serde_json::Value>(body) {
        Ok(v) => {
            if let Err(e) = AddRequest::from_value(v) {
                check_error(body, &strict::redact(&e));
            }
        }
        Err(e) => check_error(body, &e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 22 {
        0 => check_add(body),
        1 => check::<AddMemory>(body),
        2 => check::<AddMany>(body),
        3 => check::<ListQuery>(body),
        4 => check::<SearchIn>(body),
        5 => check::<DeriveIn>(body),
        6 => check::<ToolCallIn>(body),
        7 => check::<AttestIn>(body),
        8 => check::<RevokeIn>(body),
        9 => check::<PromoteIn>(body),
        10 => check::<UpdateIn>(body),
        11 => check::<AliasUpdateIn>(body),
        12 => check::<FeedbackIn>(body),
        13 => check::<PrepareGrantIn>(body),
        14 => check::<RecordGrantArgs>(body),
        15 => check::<DecideIn>(body),
        16 => check::<RegisterPrincipalIn>(body),
        17 => check::<MintKeyIn>(body),
        18 => check::<ExportQuery>(body),
        19 => check::<GetMemoryArgs>(body),
        20 => check::<SessionIn>(body),
        _ => check::<UpdateMemoryArgs>(body),
    }
});
