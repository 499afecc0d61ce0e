//! Crash soak (issue 35): `memwarden serve` is killed with SIGKILL again and again while clients
//! write, and restarted on the same store. Every write carries an `Idempotency-Key`; a write
//! whose answer the kill swallowed is retried with its key after the restart. At the end every
//! acknowledged write must be stored exactly once, and no write at all stored twice.
//!
//! What is counted, per write (a unique tag in its text, also its idempotency key):
//! - *acknowledged*: answered 201 (first answer or replay);
//! - *confirmed*: answered 409 `idempotency_answer_lost` (committed, answer lost in the crash);
//! - *lost*: acknowledged or confirmed but not stored; *duplicated*: stored more than once;
//! - *phantom*: stored although every retry was refused (must be 0 too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::server::{Client, Spawn, free_port, server_args};
use crate::BenchError;

/// Most cycles one run may ask for.
pub const SOAK_CYCLES_MAX: usize = 10_000;
/// Most concurrent writers.
pub const SOAK_CLIENTS_MAX: usize = 16;
/// Pause between one client's writes (keeps each client namespace under the list limit).
const WRITE_PAUSE_MS: u64 = 25;
/// How long the last phase retries writes still unresolved (covers the server's 60 s
/// in-flight window for a record committed just before a kill).
const SETTLE_MAX: Duration = Duration::from_secs(120);

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// The `memwarden` executable.
    pub exe: PathBuf,
    /// Output directory (soak.md, soak.json, server.log).
    pub out: PathBuf,
    /// Kill/restart cycles.
    pub cycles: usize,
    /// Concurrent writers.
    pub clients: usize,
    /// A PostgreSQL spec with `schema=` (None: the embedded SQLite store).
    pub store: Option<String>,
    /// Seed of the kill times.
    pub seed: u64,
    /// Revision stamp for the report.
    pub git_rev: Option<String>,
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Kill/restart cycles run.
    pub cycles: usize,
    /// Concurrent writers.
    pub clients: usize,
    /// Seed of the kill times.
    pub seed: u64,
    /// Revision measured.
    pub git_rev: Option<String>,
    /// When (UTC).
    pub date_utc: String,
    /// Where.
    pub machine: super::Machine,
    /// Wall time of the whole run (s).
    pub wall_s: f64,
    /// Writes sent (distinct tags).
    pub attempted: usize,
    /// Writes answered 201 (first answer or replay).
    pub acknowledged: usize,
    /// Writes answered 409 `idempotency_answer_lost` (committed; the kill took the answer).
    pub confirmed_after_crash: usize,
    /// Answers replayed under an idempotency key (the retry of a write the kill interrupted).
    pub replayed: usize,
    /// Distinct writes stored.
    pub stored: usize,
    /// Acknowledged or confirmed writes not stored.
    pub lost: usize,
    /// Writes stored more than once.
    pub duplicated: usize,
    /// Writes stored that were never acknowledged or confirmed.
    pub phantom: usize,
    /// Writes still unanswered when the settle window ended.
    pub unresolved: usize,
    /// Time from spawn to `/readyz` 200, median over the cycles (ms).
    pub ready_ms_p50: f64,
    /// The slowest start (ms).
    pub ready_ms_max: f64,
    /// Unexpected answers (status and code), counted.
    pub unexpected: BTreeMap<String, usize>,
    /// `GET /v1/audit/verify` of the tenant passed at the end.
    pub log_verifies: bool,
}

#[derive(Default)]
struct Tally {
    attempted: BTreeSet<String>,
    acked: BTreeSet<String>,
    confirmed: BTreeSet<String>,
    replayed: usize,
    unexpected: BTreeMap<String, usize>,
}

/// One server process on the soak's store (SIGKILLed on drop).
struct Proc {
    child: Child,
    base: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(o: &SoakOptions, data: &Path, key_dir: &Path, admin: &str, log: &Path) -> Result<Proc, BenchError> {
    let port = free_port()?;
    let how = Spawn { embedder: "hash", model_dir: None, store: o.store.as_deref().map(|s| (s, key_dir)) };
    let args = server_args(&data.display().to_string(), port, &how);
    let f = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| BenchError::Io(format!("{}: {e}", log.display())))?;
    let f2 = f.try_clone().map_err(|e| BenchError::Io(e.to_string()))?;
    let mut cmd = Command::new(&o.exe);
    cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(f)).stderr(Stdio::from(f2));
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|n| n.starts_with("MEMWARDEN_")) {
            cmd.env_remove(&k);
        }
    }
    cmd.env("MEMWARDEN_ADMIN_TOKEN", admin);
    let child = cmd.spawn().map_err(|e| BenchError::Io(format!("cannot start {}: {e}", o.exe.display())))?;
    Ok(Proc { child, base: format!("http://127.0.0.1:{port}") })
}

fn wait_ready(p: &mut Proc) -> Result<Duration, BenchError> {
    let t0 = Instant::now();
    let c = Client::new(&p.base);
    loop {
        if let Ok(Some(st)) = p.child.try_wait() {
            return Err(BenchError::Io(format!("the server exited ({st}) before it was ready (see server.log)")));
        }
        if c.get("/readyz", None).is_ok_and(|r| r.status == 200) {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err(BenchError::Io("the server was not ready after 300 s".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one write's answer means.
enum Outcome {
    Acked { replayed: bool },
    Confirmed,
    /// No answer (the server is gone, or a 5xx): retry after the restart.
    Retry,
    /// `idempotency_in_flight`: committed just before a kill, answer not yet known; retry later.
    Wait,
    Unexpected(String),
}

fn write_once(c: &Client, token: &str, tag: &str, ns: &str) -> Outcome {
    let body = serde_json::json!({"namespace": ns, "content": format!("soak write {tag}")}).to_string();
    let r = c.post_with("/v1/memories", token, &[("Idempotency-Key", tag)], body.as_bytes());
    let r = match r {
        Ok(r) => r,
        Err(_) => return Outcome::Retry,
    };
    let code = serde_json::from_str::<serde_json::Value>(&r.body).ok().and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_owned)).unwrap_or_default();
    match (r.status, code.as_str()) {
        (201, _) => Outcome::Acked { replayed: r.replayed },
        (409, "idempotency_answer_lost") => Outcome::Confirmed,
        (409, "idempotency_in_flight") => Outcome::Wait,
        (s, _) if s >= 500 => Outcome::Retry,
        (s, c) => Outcome::Unexpected(format!("{s} {c}")),
    }
}

/// One client's writes until `stop` (or a transport error): its pending retries first, then new
/// tags. Returns the tags still pending.
fn client_run(base: &str, token: &str, client: usize, next_seq: &mut u64, mut pending: Vec<String>, stop: &AtomicBool, tally: &Mutex<Tally>) -> Vec<String> {
    let c = Client::new(base);
    let ns = format!("soak-c{client}");
    let mut waiting: Vec<String> = Vec::new();
    loop {
        if stop.load(Ordering::SeqCst) {
            pending.append(&mut waiting);
            return pending;
        }
        let tag = match pending.first() {
            Some(t) => t.clone(),
            None => {
                *next_seq += 1;
                let t = format!("c{client}-w{:06}", *next_seq);
                if let Ok(mut t2) = tally.lock() {
                    t2.attempted.insert(t.clone());
                }
                pending.push(t.clone());
                t
            }
        };
        let out = write_once(&c, token, &tag, &ns);
        let Ok(mut t) = tally.lock() else { return pending };
        match out {
            Outcome::Acked { replayed } => {
                t.acked.insert(tag.clone());
                t.replayed += usize::from(replayed);
                pending.retain(|p| *p != tag);
            }
            Outcome::Confirmed => {
                t.confirmed.insert(tag.clone());
                pending.retain(|p| *p != tag);
            }
            Outcome::Retry => {
                pending.append(&mut waiting);
                return pending;
            }
            Outcome::Wait => {
                pending.retain(|p| *p != tag);
                waiting.push(tag);
            }
            Outcome::Unexpected(what) => {
                *t.unexpected.entry(what).or_default() += 1;
                pending.retain(|p| *p != tag);
            }
        }
        drop(t);
        std::thread::sleep(Duration::from_millis(WRITE_PAUSE_MS));
    }
}

/// A small deterministic generator for the kill times.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn setup_principal(base: &str, admin: &str) -> Result<String, BenchError> {
    let c = Client::new(base);
    c.post_json("/v1/admin/principals", Some(admin), &serde_json::json!({"tenant": "soak", "id": "writer", "kind": "agent"}))?;
    let k = c.post_json("/v1/admin/keys", Some(admin), &serde_json::json!({"tenant": "soak", "principal": "writer", "label": "soak"}))?;
    k["token"].as_str().map(str::to_owned).ok_or_else(|| BenchError::Io("no token in the key answer".into()))
}

/// Run the soak.
pub fn run_soak(o: &SoakOptions, progress: &dyn Fn(&str)) -> Result<SoakReport, BenchError> {
    if o.cycles == 0 || o.cycles > SOAK_CYCLES_MAX || o.clients == 0 || o.clients > SOAK_CLIENTS_MAX {
        return Err(BenchError::Io(format!("cycles 1..={SOAK_CYCLES_MAX}, clients 1..={SOAK_CLIENTS_MAX}")));
    }
    std::fs::create_dir_all(&o.out).map_err(|e| BenchError::Io(format!("{}: {e}", o.out.display())))?;
    let t0 = Instant::now();
    let load_start = crate::retrieval::load_average();
    let dir = tempfile::Builder::new().prefix("memwarden-soak-").tempdir().map_err(|e| BenchError::Io(e.to_string()))?;
    let (data, key_dir, log) = (dir.path().join("data"), dir.path().join("store-key"), o.out.join("server.log"));
    let _ = std::fs::remove_file(&log);
    let admin = format!("mwa_soak-{:016x}{:016x}", o.seed, std::process::id());
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut token: Option<String> = None;
    let mut seqs = vec![0u64; o.clients];
    let mut pending: Vec<Vec<String>> = vec![Vec::new(); o.clients];
    let mut ready_ms = Vec::with_capacity(o.cycles);
    let mut rng = o.seed.max(1);
    for cycle in 0..o.cycles {
        let mut p = spawn(o, &data, &key_dir, &admin, &log)?;
        ready_ms.push(wait_ready(&mut p)?.as_secs_f64() * 1000.0);
        let tok = match &token {
            Some(t) => t.clone(),
            None => token.insert(setup_principal(&p.base, &admin)?).clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let kill_after = Duration::from_millis(150 + next_rand(&mut rng) % 750);
        let results: Vec<(u64, Vec<String>)> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..o.clients)
                .map(|i| {
                    let (base, tok, stop, tally) = (p.base.clone(), tok.clone(), Arc::clone(&stop), Arc::clone(&tally));
                    let (mut seq, pend) = (seqs[i], std::mem::take(&mut pending[i]));
                    sc.spawn(move || {
                        let left = client_run(&base, &tok, i, &mut seq, pend, &stop, &tally);
                        (seq, left)
                    })
                })
                .collect();
            std::thread::sleep(kill_after);
            let _ = p.child.kill(); // SIGKILL, mid-write
            let _ = p.child.wait();
            stop.store(true, Ordering::SeqCst);
            hs.into_iter().map(|h| h.join().unwrap_or((0, Vec::new()))).collect()
        });
        for (i, (seq, left)) in results.into_iter().enumerate() {
            seqs[i] = seqs[i].max(seq);
            pending[i] = left;
        }
        if (cycle + 1) % 10 == 0 {
            let t = tally.lock().map(|t| t.acked.len()).unwrap_or(0);
            progress(&format!("soak: cycle {}/{}: {t} writes acknowledged", cycle + 1, o.cycles));
        }
    }
    finish(o, &data, &key_dir, &admin, &log, token, pending, &tally, ready_ms, t0, load_start)
}

#[allow(clippy::too_many_arguments)]
fn finish(
    o: &SoakOptions,
    data: &Path,
    key_dir: &Path,
    admin: &str,
    log: &Path,
    token: Option<String>,
    pending: Vec<Vec<String>>,
    tally: &Mutex<Tally>,
    mut ready_ms: Vec<f64>,
    t0: Instant,
    load_start: String,
) -> Result<SoakReport, BenchError> {
    let token = token.ok_or_else(|| BenchError::Io("no cycle ran".into()))?;
    let mut p = spawn(o, data, key_dir, admin, log)?;
    wait_ready(&mut p)?;
    let c = Client::new(&p.base);
    // Settle: retry every unresolved write until it is answered (or the window ends).
    let mut left: Vec<(usize, String)> = pending.into_iter().enumerate().flat_map(|(i, v)| v.into_iter().map(move |t| (i, t))).collect();
    let settle0 = Instant::now();
    while !left.is_empty() && settle0.elapsed() < SETTLE_MAX {
        let mut still = Vec::new();
        for (i, tag) in left {
            let mut t = tally.lock().map_err(|_| BenchError::Io("tally poisoned".into()))?;
            match write_once(&c, &token, &tag, &format!("soak-c{i}")) {
                Outcome::Acked { replayed } => {
                    t.acked.insert(tag);
                    t.replayed += usize::from(replayed);
                }
                Outcome::Confirmed => {
                    t.confirmed.insert(tag);
                }
                Outcome::Retry | Outcome::Wait => still.push((i, tag)),
                Outcome::Unexpected(w) => *t.unexpected.entry(w).or_default() += 1,
            }
        }
        left = still;
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let mut stored: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..o.clients {
        let r = c.get(&format!("/v1/memories?namespace=soak-c{i}&limit=10000"), Some(&token)).map_err(BenchError::Io)?;
        let v: serde_json::Value = serde_json::from_str(&r.body).map_err(|e| BenchError::Io(format!("list: {e}")))?;
        for m in v["results"].as_array().into_iter().flatten() {
            if let Some(tag) = m["content"].as_str().and_then(|s| s.strip_prefix("soak write ")) {
                *stored.entry(tag.to_owned()).or_default() += 1;
            }
        }
    }
    let verify = c.get("/v1/audit/verify", Some(&token)).map_err(BenchError::Io)?;
    let log_verifies = serde_json::from_str::<serde_json::Value>(&verify.body).ok().is_some_and(|v| v["ok"] == true);
    drop(p);
    let t = tally.lock().map_err(|_| BenchError::Io("tally poisoned".into()))?;
    let answered: BTreeSet<&String> = t.acked.iter().chain(t.confirmed.iter()).collect();
    ready_ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ready_ms.get(((ready_ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    Ok(SoakReport {
        backend: if o.store.is_some() { "postgres".into() } else { "sqlite".into() },
        cycles: o.cycles,
        clients: o.clients,
        seed: o.seed,
        git_rev: o.git_rev.clone(),
        date_utc: crate::retrieval::utc_now(),
        machine: super::Machine { load_average_start: load_start, load_average_end: crate::retrieval::load_average(), ..super::machine() },
        wall_s: t0.elapsed().as_secs_f64(),
        attempted: t.attempted.len(),
        acknowledged: t.acked.len(),
        confirmed_after_crash: t.confirmed.len(),
        replayed: t.replayed,
        stored: stored.len(),
        lost: answered.iter().filter(|a| !stored.contains_key(a.as_str())).count(),
        duplicated: stored.values().filter(|n| **n > 1).count(),
        phantom: stored.keys().filter(|k| !answered.contains(k)).count(),
        unresolved: left.len(),
        ready_ms_p50: pick(0.5),
        ready_ms_max: ready_ms.last().copied().unwrap_or(0.0),
        unexpected: t.unexpected.clone(),
        log_verifies,
    })
}

/// Write soak.json and soak.md into the output directory.
pub fn write_soak(r: &SoakReport, out: &Path) -> Result<(PathBuf, PathBuf), BenchError> {
    let json = out.join("soak.json");
    let md = out.join("soak.md");
    let body = serde_json::to_string_pretty(r).map_err(|e| BenchError::Io(e.to_string()))?;
    std::fs::write(&json, body).map_err(|e| BenchError::Io(format!("{}: {e}", json.display())))?;
    let ok = r.lost == 0 && r.duplicated == 0 && r.phantom == 0 && r.unresolved == 0 && r.log_verifies;
    let text = format!(
        "# Crash soak ({backend})\n\n{date}, revision {rev}, {cpu} ({cores} cores). {cycles} cycles of: start `memwarden serve` on the same store, \
         {clients} clients write (each write with its `Idempotency-Key`), SIGKILL the server 150–900 ms after it is ready (seed {seed}); a write the kill \
         interrupted is retried with its key after the restart. Wall time {wall:.0} s.\n\n\
         | writes sent | acknowledged (201) | confirmed after a crash (409 answer lost) | answers replayed | stored | **lost** | **duplicated** | phantom | unresolved | log verifies | ready p50 / max ms |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n\
         | {att} | {ack} | {conf} | {rep} | {st} | {lost} | {dup} | {ph} | {unres} | {lv} | {r50:.0} / {rmax:.0} |\n\n\
         Unexpected answers: {unexp:?}.\n\n{verdict}\n",
        backend = r.backend,
        date = r.date_utc,
        rev = r.git_rev.as_deref().unwrap_or("unknown"),
        cpu = r.machine.cpu_model,
        cores = r.machine.cores_count,
        cycles = r.cycles,
        clients = r.clients,
        seed = r.seed,
        wall = r.wall_s,
        att = r.attempted,
        ack = r.acknowledged,
        conf = r.confirmed_after_crash,
        rep = r.replayed,
        st = r.stored,
        lost = r.lost,
        dup = r.duplicated,
        ph = r.phantom,
        unres = r.unresolved,
        lv = r.log_verifies,
        r50 = r.ready_ms_p50,
        rmax = r.ready_ms_max,
        unexp = r.unexpected,
        verdict = if ok { "PASS: no acknowledged write lost, none duplicated." } else { "FAIL: see the counts above." },
    );
    std::fs::write(&md, text).map_err(|e| BenchError::Io(format!("{}: {e}", md.display())))?;
    Ok((json, md))
}
