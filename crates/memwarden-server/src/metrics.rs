//! Prometheus metrics in the text exposition format (hand-rolled; no client library).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default, Clone)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    decisions: BTreeMap<String, u64>,
}

/// Request counters by route and status, a latency histogram by route, decisions by outcome.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    in_flight: AtomicU64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    /// Count one finished request. `route` is the matched route template (bounded cardinality).
    pub fn observe_request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let Ok(mut m) = self.inner.lock() else { return };
        *m.requests.entry((route.to_owned(), method.to_owned(), status)).or_default() += 1;
        let h = m.latency.entry(route.to_owned()).or_default();
        for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
            if seconds <= *le {
                h.buckets[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
    }

    /// Count one decision by its outcome (`allow`, `ask_user`, `block`, ...).
    pub fn observe_decision(&self, decision: &str) {
        let Ok(mut m) = self.inner.lock() else { return };
        *m.decisions.entry(decision.to_owned()).or_default() += 1;
    }

    /// An engine call started.
    pub fn engine_call_started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    /// An engine call finished.
    pub fn engine_call_finished(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Engine calls running now.
    pub fn engine_calls_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let Ok(m) = self.inner.lock() else { return out };
        let _ = writeln!(out, "# HELP memwarden_http_requests_total HTTP requests by route template, method and status.");
        let _ = writeln!(out, "# TYPE memwarden_http_requests_total counter");
        for ((route, method, status), n) in &m.requests {
            let _ = writeln!(out, "memwarden_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{status}\"}} {n}", esc(route), esc(method));
        }
        let _ = writeln!(out, "# HELP memwarden_http_request_duration_seconds HTTP request latency by route template.");
        let _ = writeln!(out, "# TYPE memwarden_http_request_duration_seconds histogram");
        for (route, h) in &m.latency {
            let r = esc(route);
            for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
                let _ = writeln!(out, "memwarden_http_request_duration_seconds_bucket{{route=\"{r}\",le=\"{le}\"}} {}", h.buckets[i]);
            }
            let _ = writeln!(out, "memwarden_http_request_duration_seconds_bucket{{route=\"{r}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "memwarden_http_request_duration_seconds_sum{{route=\"{r}\"}} {}", h.sum);
            let _ = writeln!(out, "memwarden_http_request_duration_seconds_count{{route=\"{r}\"}} {}", h.count);
        }
        let _ = writeln!(out, "# HELP memwarden_decisions_total Action decisions by outcome.");
        let _ = writeln!(out, "# TYPE memwarden_decisions_total counter");
        for d in ["allow", "redact", "reverify", "ask_user", "block"] {
            let n = m.decisions.get(d).copied().unwrap_or(0);
            let _ = writeln!(out, "memwarden_decisions_total{{decision=\"{d}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP memwarden_engine_calls_in_flight Engine calls running now.");
        let _ = writeln!(out, "# TYPE memwarden_engine_calls_in_flight gauge");
        let _ = writeln!(out, "memwarden_engine_calls_in_flight {}", self.engine_calls_in_flight());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.observe_request("/v1/memories", "POST", 201, 0.003);
        m.observe_request("/v1/memories", "POST", 201, 0.2);
        m.observe_decision("ask_user");
        let t = m.render();
        assert!(t.contains("memwarden_http_requests_total{route=\"/v1/memories\",method=\"POST\",status=\"201\"} 2"));
        assert!(t.contains("memwarden_http_request_duration_seconds_bucket{route=\"/v1/memories\",le=\"0.005\"} 1"));
        assert!(t.contains("memwarden_http_request_duration_seconds_bucket{route=\"/v1/memories\",le=\"+Inf\"} 2"));
        assert!(t.contains("memwarden_decisions_total{decision=\"ask_user\"} 1"));
    }
}
