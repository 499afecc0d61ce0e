//! Bounded connections (issue 35.5): the accept loop the server runs instead of `axum::serve`,
//! so every connection has a header timeout (idle keep-alive time included: hyper's
//! `header_read_timeout`, counted from when the server waits for a request's headers), and one
//! client address holds at most `connections_per_address_max` connections (more are closed at
//! accept). The body timeout is a middleware (`http::body_deadline_mw`). Shutdown is graceful:
//! the listener closes, idle connections close, and requests in flight finish, for at most the
//! drain period.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Limits of the accept loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    /// How long a connection may take to send a request's headers (idle time included).
    pub header_timeout: Duration,
    /// Connections one client address may hold open at once.
    pub per_address_max: usize,
}

/// Open connections per client address.
#[derive(Debug, Default, Clone)]
struct OpenPerAddress(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One open connection's place in [`OpenPerAddress`]; released when dropped.
struct Slot {
    table: OpenPerAddress,
    ip: IpAddr,
}

impl OpenPerAddress {
    /// A slot for a connection from `ip`, or `None` when it already holds `max`.
    fn take(&self, ip: IpAddr, max: usize) -> Option<Slot> {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = t.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        debug_assert!(*n <= max);
        Some(Slot { table: self.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.table.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = t.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.remove(&self.ip);
            }
        }
    }
}

/// Serve `app` on `listener` until `signal` completes, then shut down gracefully: stop
/// accepting, close idle connections, let requests in flight finish.
/// The shutdown waits at most `drain` for connections still open.
pub(crate) async fn serve(listener: tokio::net::TcpListener, app: axum::Router, limits: ConnLimits, signal: impl Future<Output = ()> + Send, drain: Duration) {
    assert!(limits.per_address_max > 0 && !limits.header_timeout.is_zero());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let open = OpenPerAddress::default();
    tokio::pin!(signal);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors, say: back off rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        let Some(slot) = open.take(peer.ip(), limits.per_address_max) else {
            tracing::warn!(%peer, max = limits.per_address_max, "connection closed at accept: too many open connections from this address");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!(drain_s = drain.as_secs(), "connections still open at the end of the drain period");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_its_share_and_a_closed_connection_frees_its_slot() {
        let open = OpenPerAddress::default();
        let ip: IpAddr = [10, 0, 0, 1].into();
        let other: IpAddr = [10, 0, 0, 2].into();
        let a = open.take(ip, 2).expect("first");
        let b = open.take(ip, 2).expect("second");
        assert!(open.take(ip, 2).is_none(), "a third from the same address is refused");
        assert!(open.take(other, 2).is_some(), "another address is not affected");
        drop(a);
        let c = open.take(ip, 2).expect("a freed slot is reusable");
        drop((b, c));
        assert!(open.0.lock().unwrap().get(&ip).is_none(), "no entry lingers for a closed address");
    }
}
