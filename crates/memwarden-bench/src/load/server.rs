//! The server under test as a child process, and the blocking HTTP client the load generator uses.

use crate::BenchError;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Most memories the benchmark puts in one `POST /v1/memories` batch; passed to the server as
/// `--batch-max` so the two always agree.
pub const BATCH_MAX: usize = 100;

/// How long the server may take to answer `GET /readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest a single request may take before it counts as a transport error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A status and body.
pub(crate) struct Reply {
    pub status: u16,
    pub body: String,
    /// The answer carried `Idempotent-Replayed: true`.
    pub replayed: bool,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// `HTTP <status> <problem code>` (the code from a problem-details body when there is one).
    pub fn describe(&self) -> String {
        let code = serde_json::from_str::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_owned));
        match code {
            Some(c) => format!("HTTP {} {c}", self.status),
            None => format!("HTTP {}", self.status),
        }
    }
}

/// One load-generator client: its own ureq agent, so its own keep-alive connection.
pub(crate) struct Client {
    agent: ureq::Agent,
    base: String,
}

impl Client {
    pub fn new(base: &str) -> Self {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(REQUEST_TIMEOUT)).no_delay(true).build().into();
        Self { agent, base: base.to_owned() }
    }

    fn finish(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Reply, String> {
        let mut r = r.map_err(|e| format!("transport: {e}"))?;
        let status = r.status().as_u16();
        let replayed = r.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
        let body = r.body_mut().with_config().limit(64 * 1024 * 1024).read_to_string().map_err(|e| format!("transport (body): {e}"))?;
        Ok(Reply { status, body, replayed })
    }

    pub fn get(&self, path: &str, token: Option<&str>) -> Result<Reply, String> {
        let mut rq = self.agent.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            rq = rq.header("Authorization", format!("Bearer {t}"));
        }
        Self::finish(rq.call())
    }

    pub fn post(&self, path: &str, token: Option<&str>, body: &[u8]) -> Result<Reply, String> {
        let mut rq = self.agent.post(format!("{}{path}", self.base)).content_type("application/json");
        if let Some(t) = token {
            rq = rq.header("Authorization", format!("Bearer {t}"));
        }
        Self::finish(rq.send(body))
    }

    /// POST a JSON body with extra headers.
    pub fn post_with(&self, path: &str, token: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Reply, String> {
        let mut rq = self.agent.post(format!("{}{path}", self.base)).content_type("application/json").header("Authorization", format!("Bearer {token}"));
        for (k, v) in headers {
            rq = rq.header(*k, *v);
        }
        Self::finish(rq.send(body))
    }

    /// POST and require a 2xx answer parsed as JSON.
    pub fn post_json(&self, path: &str, token: Option<&str>, body: &serde_json::Value) -> Result<serde_json::Value, BenchError> {
        let r = self.post(path, token, body.to_string().as_bytes()).map_err(|e| BenchError::Io(format!("POST {path}: {e}")))?;
        if !r.ok() {
            return Err(BenchError::Io(format!("POST {path}: {}: {}", r.describe(), truncate(&r.body, 400))));
        }
        serde_json::from_str(&r.body).map_err(|e| BenchError::Io(format!("POST {path}: answer is not JSON: {e}")))
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The server under test: `memwarden --data <tmp> serve` as a child process. Dropping it kills the
/// child (SIGKILL) and waits for it, then removes the data directory.
pub(crate) struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The command line (for the report).
    pub args: Vec<String>,
    log_path: PathBuf,
    /// Declared last: removed after the child is gone.
    data: tempfile::TempDir,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port: bind port 0, read the port, release it.
pub(crate) fn free_port() -> Result<u16, BenchError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::Io(format!("cannot bind a loopback port: {e}")))?;
    let port = l.local_addr().map_err(|e| BenchError::Io(format!("cannot read the bound port: {e}")))?.port();
    drop(l);
    Ok(port)
}

/// How to start a server: its embedder, model and store.
pub(crate) struct Spawn<'a> {
    /// `--embedder` (`minilm` or `hash`).
    pub embedder: &'a str,
    /// `--model-dir`, when the embedder needs the model.
    pub model_dir: Option<&'a Path>,
    /// `--store SPEC --store-key-dir DIR` (PostgreSQL), or None for the embedded store.
    pub store: Option<(&'a str, &'a Path)>,
}

/// The server's command line (after the executable).
pub(crate) fn server_args(data: &str, port: u16, how: &Spawn<'_>) -> Vec<String> {
    let mut args: Vec<String> = vec!["--data".into(), data.to_owned(), "--embedder".into(), how.embedder.to_owned()];
    if let Some(m) = how.model_dir {
        args.extend(["--model-dir".into(), m.display().to_string()]);
    }
    args.extend([
        "serve".into(),
        "--addr".into(),
        format!("127.0.0.1:{port}"),
        "--rate-per-sec".into(),
        "0".into(),
        "--batch-max".into(),
        BATCH_MAX.to_string(),
    ]);
    if let Some((spec, key_dir)) = how.store {
        args.extend(["--store".into(), spec.to_owned(), "--store-key-dir".into(), key_dir.display().to_string()]);
    }
    args
}

impl ServerProcess {
    /// Start `exe --data <tmp> --embedder E [--model-dir M] serve --addr 127.0.0.1:<port>
    /// --rate-per-sec 0 --batch-max 100 [--store SPEC --store-key-dir DIR]`, with every
    /// `MEMWARDEN_*` variable but `MEMWARDEN_MODEL_DIR` removed from its environment (so no
    /// config file, rate or embedder setting of the caller's leaks in). Its stdout and stderr go
    /// to `log_path`.
    pub fn spawn(exe: &Path, how: &Spawn<'_>, log_path: &Path) -> Result<Self, BenchError> {
        let data = tempfile::Builder::new()
            .prefix("memwarden-load-")
            .tempdir()
            .map_err(|e| BenchError::Io(format!("cannot create a data directory: {e}")))?;
        let port = free_port()?;
        let args = server_args(&data.path().display().to_string(), port, how);
        let log = std::fs::File::create(log_path).map_err(|e| BenchError::Io(format!("cannot create {}: {e}", log_path.display())))?;
        let log2 = log.try_clone().map_err(|e| BenchError::Io(format!("{}: {e}", log_path.display())))?;
        let mut cmd = Command::new(exe);
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(log)).stderr(Stdio::from(log2));
        for (k, _) in std::env::vars_os() {
            if let Some(name) = k.to_str()
                && name.starts_with("MEMWARDEN_")
                && name != "MEMWARDEN_MODEL_DIR"
            {
                cmd.env_remove(&k);
            }
        }
        let child = cmd.spawn().map_err(|e| BenchError::Io(format!("cannot start {}: {e}", exe.display())))?;
        Ok(Self { child, base: format!("http://127.0.0.1:{port}"), args, log_path: log_path.to_path_buf(), data })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `max` bytes of the server's log.
    pub fn log_tail(&self, max: u64) -> String {
        let Ok(mut f) = std::fs::File::open(&self.log_path) else { return String::new() };
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Poll `GET /readyz` until it answers 200; fails if the child exits or time runs out.
    pub fn wait_ready(&mut self) -> Result<Duration, BenchError> {
        let t0 = Instant::now();
        let client = Client::new(&self.base);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(BenchError::Io(format!("the server exited ({status}) before it was ready; its log ends:\n{}", self.log_tail(4000))));
            }
            if let Ok(r) = client.get("/readyz", None)
                && r.status == 200
            {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > READY_TIMEOUT {
                return Err(BenchError::Io(format!(
                    "the server was not ready after {} s; its log ends:\n{}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail(4000)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Fail with the log tail if the child has exited.
    pub fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(BenchError::Io(format!("the server exited ({status}); its log ends:\n{}", self.log_tail(4000)))),
            _ => Ok(()),
        }
    }

    /// Resident set size of the server process (Linux `/proc`), when readable.
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let kb = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse::<u64>().ok()?;
        Some(kb * 1024)
    }

    /// User + system CPU seconds the server process has used so far (Linux `/proc`).
    pub fn cpu_secs(&self) -> Option<f64> {
        proc_cpu_secs(&self.pid().to_string())
    }
}

/// User + system CPU seconds of process `pid` (`self` for this one) from `/proc/<pid>/stat`.
pub(crate) fn proc_cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime = f.get(11)?.parse::<u64>().ok()?;
    let stime = f.get(12)?.parse::<u64>().ok()?;
    Some((utime + stime) as f64 / clock_ticks_per_sec())
}

/// `getconf CLK_TCK` (100 on every Linux the benchmark is meant for; asked once).
fn clock_ticks_per_sec() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// User + system CPU seconds of every `postgres` process on this machine (the database server's
/// postmaster and backends, those of other users of the database included), by process id, when
/// `/proc` is readable.
pub(crate) fn postgres_cpu_secs() -> Option<BTreeMap<u32, f64>> {
    let rd = std::fs::read_dir("/proc").ok()?;
    let mut by_pid = BTreeMap::new();
    for e in rd.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else { continue };
        if comm.trim() == "postgres"
            && let (Some(s), Ok(n)) = (proc_cpu_secs(pid), pid.parse::<u32>())
        {
            by_pid.insert(n, s);
        }
    }
    (!by_pid.is_empty()).then_some(by_pid)
}

/// CPU seconds the `postgres` processes used between two [`postgres_cpu_secs`] samples: per
/// process alive at the end, its time minus its time at the start (0 for one started since). A
/// process that exited in between is not counted (its time is gone from `/proc`), so this is a
/// lower bound, never negative.
pub(crate) fn postgres_cpu_between(start: Option<&BTreeMap<u32, f64>>, end: Option<&BTreeMap<u32, f64>>) -> Option<f64> {
    let (start, end) = (start?, end?);
    Some(end.iter().map(|(pid, s)| (s - start.get(pid).copied().unwrap_or(0.0)).max(0.0)).sum())
}
