//! `SqliteStore::open_ephemeral`: the real store in a private temporary directory (on
//! /dev/shm when present), fully working, writing no index files, and gone after drop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use memwarden_store::{SqliteStore, Store, StoreConfig};

#[test]
fn an_ephemeral_store_works_and_leaves_nothing_behind() {
    let store = SqliteStore::open_ephemeral(StoreConfig::default()).unwrap();
    assert!(store.is_ephemeral());
    let dir = store.dir().to_path_buf();
    if std::path::Path::new("/dev/shm").is_dir() {
        assert!(dir.starts_with("/dev/shm"), "{}", dir.display());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    }
    register(&store);
    for n in 1..=50 {
        write(&store, n, &format!("memory {n}"));
    }
    assert_eq!(store.count(&tenant()).unwrap(), 50);
    assert!(store.item(&tenant(), &id(7)).unwrap().is_some());
    let hits = store.search(&tenant(), &ns(), &vector(7), 3, &pid("ben")).unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0].item.id(), id(7));
    assert!(store.verify_log().unwrap().is_ok());
    // A second one is a different store.
    let other = SqliteStore::open_ephemeral(StoreConfig::default()).unwrap();
    assert_ne!(other.dir(), store.dir());
    assert_eq!(other.count(&tenant()).unwrap(), 0);
    drop(store);
    assert!(!dir.exists(), "{} survived the drop", dir.display());
}

#[test]
fn an_ephemeral_store_writes_no_index_file() {
    let store = SqliteStore::open_ephemeral(StoreConfig::default()).unwrap();
    register(&store);
    for n in 1..=20 {
        write(&store, n, "x");
    }
    let index = store.dir().join("index");
    let files = || std::fs::read_dir(&index).map(|d| d.count()).unwrap_or(0);
    assert_eq!(files(), 0);
    // A clean close of a durable store saves its index; the ephemeral one does not even try.
    let held = store.dir().to_path_buf();
    drop(store);
    assert!(!held.exists());
}
