//! OpenTelemetry traces, exported as OTLP/HTTP JSON (issue 39 item 4). Off unless an endpoint is
//! configured (`otlp_endpoint`, `MEMWARDEN_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! One server span per HTTP request, a child span per memory operation (GenAI semantic
//! conventions: `gen_ai.operation.name`, `gen_ai.memory.*`, `gen_ai.retrieval.*`) and a guardrail
//! span per decision. An incoming W3C `traceparent` makes the server span its child. Spans go to
//! a bounded queue (full: dropped and counted; a request never waits for telemetry) that a
//! background thread POSTs to `{endpoint}/v1/traces` in batches, with a timeout, and drains at
//! shutdown. Spans carry ids, names, counts and verdict codes, never memory text, queries,
//! values or amounts. With telemetry off nothing is allocated per request.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The `service.name` resource attribute.
pub const SERVICE_NAME: &str = "memwarden";
/// Default most spans waiting for export; more are dropped (and counted).
pub const DEFAULT_QUEUE_SPANS_MAX: usize = 4096;
/// Default timeout of one export POST (milliseconds).
pub const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 5000;
/// Most spans in one export request.
pub const BATCH_SPANS_MAX: usize = 512;
/// How often the exporter sends what is queued (milliseconds).
pub const EXPORT_INTERVAL_MS: u64 = 500;
/// The W3C trace-context request and response header.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C vendor trace state header (passed through unchanged).
pub const TRACESTATE: &str = "tracestate";

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The endpoint is not a plain `http://` URL.
    #[error("otlp_endpoint must be an http:// URL (this build has no TLS client)")]
    Endpoint,
    /// The exporter thread could not be spawned.
    #[error("cannot start the OTLP exporter thread: {0}")]
    Thread(String),
}

/// Exporter settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtelConfig {
    /// The collector's base URL; spans go to `{endpoint}/v1/traces`.
    pub endpoint: String,
    /// Timeout of one export POST (milliseconds).
    pub export_timeout_ms: u64,
    /// Most spans waiting for export.
    pub queue_spans_max: usize,
    /// The defense preset, reported as the guardrail policy (`gen_ai.guardrail.policy`).
    pub policy: String,
}

/// A 16-byte trace id (never all zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceId(pub [u8; 16]);
/// An 8-byte span id (never all zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanId(pub [u8; 8]);

fn random_nonzero<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // A failed or all-zero draw (never seen) falls back to the clock, still non-zero.
    if getrandom::fill(&mut b).is_err() || b.iter().all(|x| *x == 0) {
        let t = unix_nanos().to_le_bytes();
        for (i, x) in b.iter_mut().enumerate() {
            *x = t[i % t.len()] ^ (i as u8).wrapping_add(1);
        }
    }
    debug_assert!(b.iter().any(|x| *x != 0));
    b
}

impl TraceId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(random_nonzero())
    }
    /// Lower-case hex, as in `traceparent` and OTLP JSON.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl SpanId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(random_nonzero())
    }
    /// Lower-case hex, as in `traceparent` and OTLP JSON.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// A W3C `traceparent` (trace-context level 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace.
    pub trace_id: TraceId,
    /// The caller's span (the parent of ours).
    pub parent_id: SpanId,
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

fn lower_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

impl TraceParent {
    /// Parse a header value; None for anything malformed (the request then starts a new trace).
    /// Version `00` has exactly four fields; a later version may append fields; `ff` is invalid.
    /// All-zero ids are invalid.
    pub fn parse(v: &str) -> Option<Self> {
        let v = v.trim_matches([' ', '\t']);
        let mut parts = v.split('-');
        let version: [u8; 1] = lower_hex(parts.next()?)?;
        let trace_id: [u8; 16] = lower_hex(parts.next()?)?;
        let parent_id: [u8; 8] = lower_hex(parts.next()?)?;
        let flags: [u8; 1] = lower_hex(parts.next()?)?;
        let extra = parts.next().is_some();
        if version[0] == 0xff || (version[0] == 0 && extra) || trace_id.iter().all(|b| *b == 0) || parent_id.iter().all(|b| *b == 0) {
            return None;
        }
        Some(Self { trace_id: TraceId(trace_id), parent_id: SpanId(parent_id), flags: flags[0] })
    }

    /// The header value (version 00).
    pub fn format(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id.hex(), self.parent_id.hex(), self.flags)
    }
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A float.
    Double(f64),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        Self::Str(s.to_owned())
    }
}
impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        Self::Str(s)
    }
}
impl From<i64> for AttrValue {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}
impl From<usize> for AttrValue {
    fn from(n: usize) -> Self {
        Self::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<u64> for AttrValue {
    fn from(n: u64) -> Self {
        Self::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<bool> for AttrValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
impl From<f64> for AttrValue {
    fn from(x: f64) -> Self {
        Self::Double(x)
    }
}

/// OTLP span kinds used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// Inside the service (memory operations, guardrails).
    Internal = 1,
    /// The handling of an incoming request.
    Server = 2,
}

/// OTLP span status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanStatus {
    /// Not set (success of an internal span, or a 4xx server span).
    Unset = 0,
    /// Explicitly successful.
    Ok = 1,
    /// Failed.
    Error = 2,
}

/// A finished span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// Its trace.
    pub trace_id: TraceId,
    /// Its id.
    pub span_id: SpanId,
    /// The parent span, if any.
    pub parent_id: Option<SpanId>,
    /// The `tracestate` that came with the parent, passed through.
    pub trace_state: Option<String>,
    /// Low-cardinality name.
    pub name: String,
    /// Kind.
    pub kind: SpanKind,
    /// Start (Unix nanoseconds).
    pub start_unix_nanos: u64,
    /// End (Unix nanoseconds).
    pub end_unix_nanos: u64,
    /// Attributes.
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// Status.
    pub status: SpanStatus,
}

/// Nanoseconds since the Unix epoch.
pub fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// The span queue shared by request threads and the exporter thread.
#[derive(Debug)]
pub struct Tracer {
    queue: Mutex<VecDeque<SpanRecord>>,
    wake: Condvar,
    closing: AtomicBool,
    dropped_spans: AtomicU64,
    exported_spans: AtomicU64,
    failed_exports: AtomicU64,
    queue_spans_max: usize,
    policy: String,
}

impl Tracer {
    fn new(queue_spans_max: usize, policy: String) -> Self {
        debug_assert!(queue_spans_max > 0);
        Self {
            queue: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            closing: AtomicBool::new(false),
            dropped_spans: AtomicU64::new(0),
            exported_spans: AtomicU64::new(0),
            failed_exports: AtomicU64::new(0),
            queue_spans_max,
            policy,
        }
    }

    /// Queue a finished span; never blocks on export. A full queue drops it (counted).
    pub fn record(&self, span: SpanRecord) {
        debug_assert!(span.end_unix_nanos >= span.start_unix_nanos);
        let Ok(mut q) = self.queue.lock() else {
            self.dropped_spans.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if q.len() >= self.queue_spans_max {
            self.dropped_spans.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(span);
        if q.len() >= BATCH_SPANS_MAX {
            self.wake.notify_one();
        }
    }

    /// Spans dropped because the queue was full.
    pub fn dropped_spans(&self) -> u64 {
        self.dropped_spans.load(Ordering::Relaxed)
    }

    /// Spans the collector accepted.
    pub fn exported_spans(&self) -> u64 {
        self.exported_spans.load(Ordering::Relaxed)
    }

    /// Export requests that failed (unreachable collector, timeout, non-2xx).
    pub fn failed_exports(&self) -> u64 {
        self.failed_exports.load(Ordering::Relaxed)
    }

    /// The exporter's counters in the Prometheus text format (appended to `/metrics`).
    pub fn render_metrics(&self) -> String {
        let counters = [
            ("memwarden_otel_spans_exported_total", "Spans the OTLP collector accepted.", self.exported_spans()),
            ("memwarden_otel_spans_dropped_total", "Spans dropped because the export queue was full.", self.dropped_spans()),
            ("memwarden_otel_export_failures_total", "OTLP export requests that failed (their spans are dropped).", self.failed_exports()),
        ];
        counters.iter().map(|(name, help, n)| format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {n}\n")).collect()
    }

    /// The guardrail policy name (the preset).
    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// Up to a batch of spans: waits up to the export interval unless closing. Empty and closing:
    /// None (the exporter stops).
    fn next_batch(&self) -> Option<Vec<SpanRecord>> {
        let mut q = self.queue.lock().ok()?;
        if !self.closing.load(Ordering::SeqCst) && q.len() < BATCH_SPANS_MAX {
            q = match self.wake.wait_timeout(q, Duration::from_millis(EXPORT_INTERVAL_MS)) {
                Ok((g, _)) => g,
                Err(_) => return None,
            };
        }
        if q.is_empty() && self.closing.load(Ordering::SeqCst) {
            return None;
        }
        let n = q.len().min(BATCH_SPANS_MAX);
        Some(q.drain(..n).collect())
    }
}

/// A running exporter: the tracer and its thread.
#[derive(Debug)]
pub struct Telemetry {
    tracer: Arc<Tracer>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Telemetry {
    /// Start the exporter thread.
    pub fn start(config: &OtelConfig) -> Result<Arc<Self>, OtelError> {
        let base = config.endpoint.trim_end_matches('/');
        if !base.starts_with("http://") || base.len() <= "http://".len() {
            return Err(OtelError::Endpoint);
        }
        let url = if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") };
        let tracer = Arc::new(Tracer::new(config.queue_spans_max.max(1), config.policy.clone()));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(config.export_timeout_ms.max(1))))
            .build()
            .into();
        let t = Arc::clone(&tracer);
        let worker = std::thread::Builder::new()
            .name("memwarden-otlp".into())
            .spawn(move || export_loop(&t, &agent, &url))
            .map_err(|e| OtelError::Thread(e.to_string()))?;
        Ok(Arc::new(Self { tracer, worker: Mutex::new(Some(worker)) }))
    }

    /// The tracer spans are recorded into.
    pub fn tracer(&self) -> &Arc<Tracer> {
        &self.tracer
    }

    /// Export what is queued and stop the exporter thread (blocking: at most one export timeout
    /// per remaining batch). Idempotent.
    pub fn shutdown(&self) {
        self.tracer.closing.store(true, Ordering::SeqCst);
        self.tracer.wake.notify_all();
        let handle = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(h) = handle
            && h.join().is_err()
        {
            tracing::error!("the OTLP exporter thread panicked");
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // Without a shutdown (a server dropped before it ran): let the thread finish on its own.
        self.tracer.closing.store(true, Ordering::SeqCst);
        self.tracer.wake.notify_all();
    }
}

fn export_loop(tracer: &Tracer, agent: &ureq::Agent, url: &str) {
    while let Some(batch) = tracer.next_batch() {
        if batch.is_empty() {
            continue;
        }
        let n = batch.len() as u64;
        if !export_batch(agent, url, &batch) {
            tracer.failed_exports.fetch_add(1, Ordering::Relaxed);
            // At shutdown a failing collector gets one try, not one timeout per queued batch.
            if tracer.closing.load(Ordering::SeqCst) {
                let left = tracer.queue.lock().map(|mut q| q.drain(..).count()).unwrap_or(0);
                tracer.dropped_spans.fetch_add(left as u64, Ordering::Relaxed);
                return;
            }
            continue;
        }
        tracer.exported_spans.fetch_add(n, Ordering::Relaxed);
    }
}

/// POST one batch; whether the collector accepted it (a failure is logged at debug level).
fn export_batch(agent: &ureq::Agent, url: &str, batch: &[SpanRecord]) -> bool {
    let body = export_request(batch).to_string();
    match agent.post(url).header("content-type", "application/json").send(body.as_bytes()) {
        Ok(r) if r.status().is_success() => true,
        Ok(r) => {
            tracing::debug!(status = r.status().as_u16(), spans = batch.len(), "OTLP collector refused a batch");
            false
        }
        Err(e) => {
            tracing::debug!(error = %e, spans = batch.len(), "OTLP export failed; batch dropped");
            false
        }
    }
}

fn attr_json(key: &str, v: &AttrValue) -> Value {
    let value = match v {
        AttrValue::Str(s) => json!({ "stringValue": s }),
        // int64 is a decimal string in OTLP JSON.
        AttrValue::Int(n) => json!({ "intValue": n.to_string() }),
        AttrValue::Bool(b) => json!({ "boolValue": b }),
        AttrValue::Double(x) if x.is_finite() => json!({ "doubleValue": x }),
        AttrValue::Double(_) => json!({ "stringValue": "NaN" }),
    };
    json!({ "key": key, "value": value })
}

fn span_json(s: &SpanRecord) -> Value {
    let mut v = json!({
        "traceId": s.trace_id.hex(),
        "spanId": s.span_id.hex(),
        "name": s.name,
        "kind": s.kind as i32,
        "startTimeUnixNano": s.start_unix_nanos.to_string(),
        "endTimeUnixNano": s.end_unix_nanos.to_string(),
        "attributes": s.attributes.iter().map(|(k, a)| attr_json(k, a)).collect::<Vec<_>>(),
        "status": { "code": s.status as i32 },
    });
    if let (Some(p), Some(o)) = (s.parent_id, v.as_object_mut()) {
        o.insert("parentSpanId".into(), Value::String(p.hex()));
    }
    if let (Some(ts), Some(o)) = (&s.trace_state, v.as_object_mut()) {
        o.insert("traceState".into(), Value::String(ts.clone()));
    }
    v
}

/// An OTLP `ExportTraceServiceRequest` in the protobuf JSON mapping.
pub fn export_request(spans: &[SpanRecord]) -> Value {
    json!({
        "resourceSpans": [{
            "resource": { "attributes": [
                attr_json("service.name", &AttrValue::from(SERVICE_NAME)),
                attr_json("service.version", &AttrValue::from(env!("CARGO_PKG_VERSION"))),
                attr_json("telemetry.sdk.language", &AttrValue::from("rust")),
            ]},
            "scopeSpans": [{
                "scope": { "name": "memwarden-server", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans.iter().map(span_json).collect::<Vec<_>>(),
            }],
        }]
    })
}

/// The span a request (or operation) runs in: where child spans attach.
#[derive(Clone, Debug)]
pub struct SpanCtx {
    /// The tracer children record into.
    pub tracer: Arc<Tracer>,
    /// The trace.
    pub trace_id: TraceId,
    /// The current span (the parent of children).
    pub span_id: SpanId,
}

tokio::task_local! {
    static REQUEST_SPAN: SpanCtx;
}

thread_local! {
    static CURRENT: RefCell<Option<SpanCtx>> = const { RefCell::new(None) };
}

/// Run `fut` with `ctx` as the request's span (read by [`request_span`]).
pub async fn scope<F: std::future::Future>(ctx: SpanCtx, fut: F) -> F::Output {
    REQUEST_SPAN.scope(ctx, fut).await
}

/// The span of the request the current task serves (None: telemetry off, or not in a request).
pub fn request_span() -> Option<SpanCtx> {
    REQUEST_SPAN.try_with(SpanCtx::clone).ok()
}

/// While alive, operation spans on this thread are children of the entered span.
pub struct Entered(Option<SpanCtx>);

/// Make `ctx` the parent of operation spans started on this thread (on a blocking-pool thread,
/// around one engine call). None: nothing is recorded.
pub fn enter(ctx: Option<SpanCtx>) -> Entered {
    Entered(CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), ctx)))
}

impl Drop for Entered {
    fn drop(&mut self) {
        let prev = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// An operation span being recorded; a no-op (no allocation) when no span is entered.
pub struct OpSpan(Option<Box<(Arc<Tracer>, SpanRecord)>>);

impl OpSpan {
    /// Start a child span of the entered span: `gen_ai.operation.name` = `operation`, named
    /// `{operation} memwarden`.
    pub fn start(operation: &'static str) -> Self {
        let parent = CURRENT.with(|c| c.borrow().clone());
        let Some(p) = parent else { return Self(None) };
        let record = SpanRecord {
            trace_id: p.trace_id,
            span_id: SpanId::random(),
            parent_id: Some(p.span_id),
            trace_state: None,
            name: format!("{operation} {SERVICE_NAME}"),
            kind: SpanKind::Internal,
            start_unix_nanos: unix_nanos(),
            end_unix_nanos: 0,
            attributes: vec![("gen_ai.operation.name", AttrValue::from(operation)), ("gen_ai.provider.name", AttrValue::from(SERVICE_NAME))],
            status: SpanStatus::Unset,
        };
        Self(Some(Box::new((p.tracer, record))))
    }

    /// Whether this span records (telemetry on, inside a request).
    pub fn is_recording(&self) -> bool {
        self.0.is_some()
    }

    /// The guardrail policy (the preset), if recording.
    pub fn policy(&self) -> Option<&str> {
        self.0.as_ref().map(|b| b.0.policy())
    }

    /// Set an attribute; `value` is evaluated only when recording.
    pub fn set<V: Into<AttrValue>>(&mut self, key: &'static str, value: impl FnOnce() -> V) {
        if let Some(b) = self.0.as_mut() {
            b.1.attributes.push((key, value().into()));
        }
    }

    /// End with the outcome of `r`: an error sets status ERROR and `error.type` to its stable
    /// code (never its detail).
    pub fn end<T>(mut self, r: &Result<T, crate::problem::ApiError>) {
        if let (Some(b), Err(e)) = (self.0.as_mut(), r) {
            b.1.status = SpanStatus::Error;
            b.1.attributes.push(("error.type", AttrValue::from(e.code)));
        }
    }
}

impl Drop for OpSpan {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            let (tracer, mut record) = *b;
            record.end_unix_nanos = unix_nanos().max(record.start_unix_nanos);
            tracer.record(record);
        }
    }
}

/// The server span of one HTTP request, open while the request is served.
#[derive(Debug)]
pub struct ServerSpan {
    /// Where the request's operation spans attach.
    pub ctx: SpanCtx,
    parent_id: Option<SpanId>,
    trace_state: Option<String>,
    start_unix_nanos: u64,
}

impl ServerSpan {
    /// Open the span: a child of a valid incoming `traceparent` (with its `tracestate`), else
    /// the root of a new trace (a malformed header is ignored, never refused). Parent-based
    /// sampling: a caller's trace it did not sample (flags bit 0 clear) is not recorded (None).
    pub fn start(tracer: &Arc<Tracer>, headers: &axum::http::HeaderMap) -> Option<Self> {
        let parent = headers.get(TRACEPARENT).and_then(|v| v.to_str().ok()).and_then(TraceParent::parse);
        if parent.is_some_and(|p| p.flags & 1 == 0) {
            return None;
        }
        let trace_state = match parent {
            Some(_) => headers.get(TRACESTATE).and_then(|v| v.to_str().ok()).filter(|v| v.len() <= 512).map(str::to_owned),
            None => None,
        };
        let trace_id = parent.map_or_else(TraceId::random, |p| p.trace_id);
        let ctx = SpanCtx { tracer: Arc::clone(tracer), trace_id, span_id: SpanId::random() };
        Some(Self { ctx, parent_id: parent.map(|p| p.parent_id), trace_state, start_unix_nanos: unix_nanos() })
    }

    /// The `traceparent` naming this span (for the response).
    pub fn traceparent(&self) -> String {
        TraceParent { trace_id: self.ctx.trace_id, parent_id: self.ctx.span_id, flags: 1 }.format()
    }

    /// Close and queue the span (`{method} {route}`, HTTP semantic conventions; a 5xx is an
    /// error).
    pub fn finish(self, method: &str, route: &str, status: u16) {
        let record = SpanRecord {
            trace_id: self.ctx.trace_id,
            span_id: self.ctx.span_id,
            parent_id: self.parent_id,
            trace_state: self.trace_state,
            name: format!("{method} {route}"),
            kind: SpanKind::Server,
            start_unix_nanos: self.start_unix_nanos,
            end_unix_nanos: unix_nanos().max(self.start_unix_nanos),
            attributes: vec![
                ("http.request.method", AttrValue::from(method)),
                ("http.route", AttrValue::from(route)),
                ("http.response.status_code", AttrValue::from(i64::from(status))),
            ],
            status: if status >= 500 { SpanStatus::Error } else { SpanStatus::Unset },
        };
        self.ctx.tracer.record(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_refuses_malformed() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(v).unwrap();
        assert_eq!(tp.trace_id.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.parent_id.hex(), "00f067aa0ba902b7");
        assert_eq!(tp.flags, 1);
        assert_eq!(tp.format(), v);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?}");
        }
        // A later version may append fields.
        assert!(TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what").is_some());
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let t = Tracer::new(2, "full".into());
        let s = SpanRecord {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            parent_id: None,
            trace_state: None,
            name: "x".into(),
            kind: SpanKind::Server,
            start_unix_nanos: 1,
            end_unix_nanos: 2,
            attributes: vec![],
            status: SpanStatus::Unset,
        };
        for _ in 0..5 {
            t.record(s.clone());
        }
        assert_eq!(t.dropped_spans(), 3);
        assert_eq!(t.queue.lock().unwrap().len(), 2);
    }

    #[test]
    fn an_entered_span_parents_operation_spans_in_the_otlp_json_mapping() {
        let tracer = Arc::new(Tracer::new(16, "full".into()));
        let ctx = SpanCtx { tracer: Arc::clone(&tracer), trace_id: TraceId([0xab; 16]), span_id: SpanId([0x01; 8]) };
        {
            let _entered = enter(Some(ctx));
            let mut s = OpSpan::start("get_memory");
            s.set("gen_ai.memory.id", || "m1");
            s.set("gen_ai.retrieval.top_k", || 5usize);
        }
        assert!(!OpSpan::start("get_memory").is_recording(), "the entered span ends with its guard");
        let spans: Vec<SpanRecord> = tracer.queue.lock().unwrap().drain(..).collect();
        let v = export_request(&spans);
        let span = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "abababababababababababababababab");
        assert_eq!(span["parentSpanId"], "0101010101010101");
        assert_eq!(span["name"], "get_memory memwarden");
        assert_eq!(span["kind"], 1);
        assert_eq!(span["attributes"][0], json!({"key": "gen_ai.operation.name", "value": {"stringValue": "get_memory"}}));
        assert_eq!(span["attributes"][3], json!({"key": "gen_ai.retrieval.top_k", "value": {"intValue": "5"}}));
        assert_eq!(v["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"], SERVICE_NAME);
    }

    #[test]
    fn no_span_is_recorded_outside_an_entered_span() {
        let s = OpSpan::start("search_memory");
        assert!(!s.is_recording());
    }
}
