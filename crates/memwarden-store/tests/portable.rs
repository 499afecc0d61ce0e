//! A data directory is the whole state: with the default key location the checkpoint-signing
//! key, `store.json` and the witness live in `<data dir>/keys`, so `cp -a` of a stopped store
//! opens (and verifies) at another path; a store whose key is still where earlier versions kept
//! it by default (`KeyLocation::StateDir`) has it copied in at open; and a second open of a
//! directory in use names the process holding it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_store::{KeyLocation, SqliteStore, Store, StoreConfig, StoreError};
use std::path::Path;
use std::process::Command;

/// `cp -a from to`.
fn cp_a(from: &Path, to: &Path) {
    let out = Command::new("cp").arg("-a").arg(from).arg(to).output().unwrap();
    assert!(out.status.success(), "cp -a: {}", String::from_utf8_lossy(&out.stderr));
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A store in `dir` opened with the default config, two memories committed.
fn populate(dir: &Path) -> String {
    let store = SqliteStore::open(dir, StoreConfig::default()).unwrap();
    register(&store);
    write(&store, 1, "the first memory");
    write(&store, 2, "the second memory");
    assert!(store.verify_log().unwrap().is_ok());
    store.store_id().to_owned()
}

fn reads_back(store: &SqliteStore) {
    assert_eq!(store.item(&tenant(), &id(1)).unwrap().unwrap().content(), "the first memory");
    assert_eq!(store.item(&tenant(), &id(2)).unwrap().unwrap().content(), "the second memory");
}

#[test]
fn a_copied_data_directory_opens_verifies_and_reads_back_at_another_path() {
    let root = tempfile::tempdir().unwrap();
    let d1 = root.path().join("d1");
    let store_id = populate(&d1);
    let d3 = root.path().join("d3");
    cp_a(&d1, &d3);
    // Offline verification of the copy uses the keys it carries.
    let report = SqliteStore::verify_dir(&d3).unwrap();
    assert!(report.is_ok(), "{:?}", report.problem);
    {
        let copy = SqliteStore::open(&d3, StoreConfig::default()).unwrap();
        assert_eq!(copy.store_id(), store_id);
        assert_eq!(copy.key_dir(), d3.join("keys"));
        assert!(copy.verify_log().unwrap().is_ok());
        reads_back(&copy);
        // It is a store of its own from here on: it commits, and the original is untouched.
        write(&copy, 3, "written in the copy");
        assert!(copy.verify_log().unwrap().is_ok());
    }
    let store_json: serde_json::Value = serde_json::from_slice(&std::fs::read(d3.join("keys").join("store.json")).unwrap()).unwrap();
    assert_eq!(store_json["store_id"], store_id.as_str());
    assert_eq!(store_json["data_dir"], d3.display().to_string(), "the recorded path follows the copy");
    let copy = SqliteStore::open(&d3, StoreConfig::default()).unwrap();
    assert!(copy.item(&tenant(), &id(3)).unwrap().is_some());
    let original = SqliteStore::open(&d1, StoreConfig::default()).unwrap();
    reads_back(&original);
    assert!(original.item(&tenant(), &id(3)).unwrap().is_none());
    assert!(original.verify_log().unwrap().is_ok());
}

#[test]
fn a_tampered_copy_is_named_by_verify_dir() {
    // What the demo does: copy the data directory, flip a byte of one log entry, verify.
    let root = tempfile::tempdir().unwrap();
    let d1 = root.path().join("d1");
    populate(&d1);
    let bad = root.path().join("tampered");
    cp_a(&d1, &bad);
    SqliteStore::tamper_log_entry(&bad, 2).unwrap();
    let report = SqliteStore::verify_dir(&bad).unwrap();
    assert!(report.problem.is_some(), "a flipped entry must not verify");
    assert_eq!(report.first_bad_index(), Some(2), "{:?}", report.problem);
    assert!(SqliteStore::verify_dir(&d1).unwrap().is_ok(), "the original is untouched");
    assert!(matches!(SqliteStore::open(&bad, StoreConfig::default()), Err(StoreError::LogTampered(_))));
}

#[cfg(unix)]
#[test]
fn the_default_key_directory_is_private_and_inside_the_data_directory() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    populate(&dir);
    let keys = dir.join("keys");
    assert_eq!(SqliteStore::key_dir_for(&dir, &StoreConfig::default()).unwrap(), keys);
    assert_eq!(StoreConfig::default().keys, KeyLocation::InDataDir);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&keys), 0o700);
    assert_eq!(mode(&keys.join("log.ed25519")), 0o600);
    assert_eq!(mode(&keys.join("store.json")), 0o600);
    assert_eq!(mode(&keys.join("witness")), 0o700);
    let witnesses: Vec<_> = std::fs::read_dir(keys.join("witness")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!witnesses.is_empty(), "the witness is in the data directory too");
    for w in witnesses {
        assert_eq!(mode(&w), 0o600, "{}", w.display());
    }
}

#[test]
fn a_second_open_of_a_directory_in_use_names_the_pid() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let first = SqliteStore::open(&dir, StoreConfig::default()).unwrap();
    let pid = std::process::id();
    assert_eq!(std::fs::read_to_string(dir.join("memwarden.lock")).unwrap().trim(), pid.to_string());
    match SqliteStore::open(&dir, StoreConfig::default()) {
        Err(e @ StoreError::Locked(_)) => {
            let msg = e.to_string();
            assert_eq!(msg, format!("data directory {} in use by pid {pid}", dir.display()));
            assert!(msg.contains("in use by pid") && msg.contains(&pid.to_string()), "{msg}");
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second writer opened the same data directory"),
    }
    // Offline verification still works while it is open; once closed, it opens again.
    assert!(SqliteStore::verify_dir(&dir).unwrap().is_ok());
    drop(first);
    drop(SqliteStore::open(&dir, StoreConfig::default()).unwrap());
    // A lock file whose pid cannot be read still gives a clear message.
    let first = SqliteStore::open(&dir, StoreConfig::default()).unwrap();
    std::fs::write(dir.join("memwarden.lock"), b"").unwrap();
    let e = SqliteStore::open(&dir, StoreConfig::default()).err().unwrap();
    assert_eq!(e.to_string(), format!("data directory {} in use by another process", dir.display()));
    drop(first);
}

/// The migration test runs in a child process of this test binary (so that `XDG_STATE_HOME`,
/// which the old default location is derived from, can be set for it alone: the other tests
/// of this binary run in parallel threads of one process).
const CHILD_ENV: &str = "MEMWARDEN_PORTABLE_MIGRATION_ROOT";

#[test]
fn a_store_with_its_key_in_the_old_default_location_is_migrated_into_the_data_directory() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "migration_child", "--nocapture", "--test-threads", "1"])
        .env("XDG_STATE_HOME", &state)
        .env(CHILD_ENV, root.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child test did not run:\n{stdout}");
    assert!(stderr.contains("copied the key directory"), "the migration is logged:\n{stderr}");
    // From the parent (no XDG_STATE_HOME of its own): both data directories carry their keys.
    let old_dirs: Vec<_> = std::fs::read_dir(state.join("memwarden").join("keys")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(old_dirs.len(), 1, "{old_dirs:?}");
    let old_key = std::fs::read(old_dirs[0].join("log.ed25519")).unwrap();
    for d in ["d1", "d2"] {
        let dir = root.path().join(d);
        assert_eq!(std::fs::read(dir.join("keys").join("log.ed25519")).unwrap(), old_key, "{d}");
        let store = SqliteStore::open(&dir, StoreConfig::default()).unwrap();
        assert!(store.verify_log().unwrap().is_ok(), "{d}");
        reads_back(&store);
    }
}

/// Runs only as the child of the test above (a no-op otherwise).
#[test]
fn migration_child() {
    let Some(root) = std::env::var_os(CHILD_ENV) else { return };
    let root = Path::new(&root);
    let d1 = root.join("d1");
    // What the previous default did: keys in `$XDG_STATE_HOME/memwarden/keys/<name>-<hash>`
    // (by the data directory's canonical path, so it must exist first).
    std::fs::create_dir(&d1).unwrap();
    let old_cfg = StoreConfig { keys: KeyLocation::StateDir, ..StoreConfig::default() };
    let old = SqliteStore::key_dir_for(&d1, &old_cfg).unwrap();
    assert!(old.starts_with(std::env::var_os("XDG_STATE_HOME").unwrap()));
    let store_id = {
        let store = SqliteStore::open(&d1, StoreConfig::default().with_key_dir(&old)).unwrap();
        register(&store);
        write(&store, 1, "the first memory");
        write(&store, 2, "the second memory");
        store.store_id().to_owned()
    };
    assert!(old.join("log.ed25519").exists() && !d1.join("keys").exists(), "the old layout: the key outside");
    // A copy made before the upgrade, at another path: its old key directory is found by store id.
    let d2 = root.join("d2");
    cp_a(&d1, &d2);
    // Before the upgrade opens it, offline verification finds the old key directory.
    assert!(SqliteStore::verify_dir(&d1).unwrap().is_ok());
    for dir in [&d1, &d2] {
        {
            let store = SqliteStore::open(dir, StoreConfig::default()).unwrap();
            assert_eq!(store.key_dir(), dir.join("keys"));
            assert_eq!(store.store_id(), store_id);
            assert!(store.verify_log().unwrap().is_ok());
            reads_back(&store);
        }
        let keys = dir.join("keys");
        assert_eq!(std::fs::read(keys.join("log.ed25519")).unwrap(), std::fs::read(old.join("log.ed25519")).unwrap());
        assert!(keys.join("store.json").exists());
        assert!(std::fs::read_dir(keys.join("witness")).unwrap().next().is_some(), "the witness came along");
        #[cfg(unix)]
        {
            assert_eq!(mode(&keys), 0o700);
            assert_eq!(mode(&keys.join("log.ed25519")), 0o600);
            assert_eq!(mode(&keys.join("store.json")), 0o600);
        }
        // Reopens from its own keys, and verifies offline with them.
        drop(SqliteStore::open(dir, StoreConfig::default()).unwrap());
        assert!(SqliteStore::verify_dir(dir).unwrap().is_ok());
    }
    assert!(old.join("log.ed25519").exists(), "the old key directory is left in place");
    // The old location stays reachable by name (read-only here: opening d1 with it would move
    // the key out of the data directory again).
    assert!(SqliteStore::verify_dir_with(&d1, &old_cfg).unwrap().is_ok());
}
