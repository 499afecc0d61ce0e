//! `memwarden bench lifecycle` is wired: its flags parse, and bad options are a one-line error
//! before any run starts. (The simulation itself is tested at tiny sizes in memwarden-bench; a
//! `--quick` run takes minutes even in release, far too long for a debug test.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::process::{Command, Output};

fn mw(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_memwarden")).arg("--data").arg(dir.path().join("data")).args(args).output().unwrap()
}

fn one_line_error(args: &[&str], fragment: &str) {
    let out = mw(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().map(|l| l.trim_start_matches('\r')).filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?} printed more than one line: {stderr}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains(fragment), "{args:?}: expected {fragment:?} in {:?}", lines[0]);
}

#[test]
fn the_lifecycle_bench_is_wired_and_refuses_bad_options() {
    let help = mw(&["bench", "lifecycle", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in ["--quick", "--agent", "--seed", "--agents", "--out"] {
        assert!(text.contains(flag), "--help names {flag}: {text}");
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    one_line_error(&["bench", "lifecycle", "--quick", "--agent", "gpt", "--out", dir], "unknown agent");
    one_line_error(&["bench", "lifecycle", "--quick", "--agents", "1", "--out", dir], "--agents must be 2-64");
    one_line_error(&["bench", "lifecycle", "--quick", "--agents", "65", "--out", dir], "--agents must be 2-64");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing written on a refused run");
}
