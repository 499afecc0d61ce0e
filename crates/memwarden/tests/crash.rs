//! Crash test: a child process writing in a loop is killed with SIGKILL at random moments (20
//! times); every write it acknowledged is present after reopening, the log verifies, and the
//! vector index (saved only at clean closes, replayed after a crash) finds every acknowledged
//! write by its own text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use memwarden_core::prelude::*;
use memwarden_engine::{Engine, EngineConfig};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// xorshift64*: the delays are random per run, and the seed is printed so a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let seed = std::env::var("CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("crash test seed {seed} (set CRASH_SEED to replay)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::new("default").unwrap();
    let mut acked: Vec<ItemId> = Vec::new();
    let kills = 20;
    for round in 0..kills {
        let batch = if round % 2 == 0 { "1" } else { "16" };
        let mut child = Command::new(env!("CARGO_BIN_EXE_memwarden"))
            .arg("--data")
            .arg(dir.path())
            .args(["--embedder", "hash", "crash-writer", "--batch", batch])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut ids = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(id) = line.strip_prefix("ACK ") {
                    ids.push(ItemId::parse(id).unwrap());
                }
            }
            ids
        });
        // Let it start and write, then kill it at a random moment.
        let delay = Duration::from_millis(150 + rng.next() % 600);
        let t = Instant::now();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let ids = reader.join().unwrap();
        eprintln!("round {round}: killed after {:?}, {} writes acknowledged", t.elapsed(), ids.len());
        acked.extend(ids);
        // Reopen: the log must verify (open refuses otherwise) and every acknowledged write be there.
        let embedder = std::sync::Arc::new(memwarden_engine::embed::HashEmbedder::new(384));
        // Vector search only: what is checked below is the vector index file's recovery (the
        // lexical index lives in the commit's own SQLite transaction). Under hybrid search the
        // near-identical test texts ("... 3985.6.5" / "... 3985.5.6") tie lexically.
        let engine = Engine::open(dir.path(), EngineConfig { embedder: Some(embedder), hybrid: false, ..EngineConfig::default() }).unwrap();
        let report = engine.verify_log().unwrap();
        assert!(report.is_ok(), "round {round}: {:?}", report.problem);
        for id in &acked {
            assert!(engine.store().item(&tenant, id).unwrap().is_some(), "round {round}: acknowledged write {id} lost");
        }
        // The index is in step: this round's writes (never saved to the index file, since the
        // writer was killed) come back as their own nearest neighbour.
        let writer = engine.authenticate(&tenant, &PrincipalId::new("crash-writer").unwrap()).unwrap();
        let ns = Namespace::new("crash").unwrap();
        for id in acked.iter().rev().take(12) {
            let text = engine.store().item(&tenant, id).unwrap().unwrap().content().to_owned();
            let hits = engine.search(&writer, &ns, &text, 1).unwrap();
            assert_eq!(hits.first().map(|h| h.item.id()), Some(*id), "round {round}: index lost {id} ({text:?})");
        }
    }
    assert!(acked.len() > kills, "the writer barely wrote anything ({} writes)", acked.len());
}
