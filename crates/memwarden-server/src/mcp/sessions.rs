//! Streamable-HTTP MCP sessions: each is bound to the key that opened it (issue 35.5).

/// The header naming a streamable-HTTP MCP session.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Most MCP sessions a server tracks at once; past it the oldest is forgotten, and a forgotten
/// session is usable by nobody (fail closed: its client opens a new one).
pub const MCP_SESSIONS_MAX: usize = 10_000;

/// Who opened an MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionOwner {
    /// An API key, by its id.
    Key(String),
    /// The admin token.
    Admin,
}

/// The owner of every MCP session this server opened (issue 35.5: sessions are bound to the key
/// that opened them). A session it does not know is usable by nobody.
#[derive(Debug, Default)]
pub(crate) struct SessionOwners(std::sync::Mutex<(std::collections::HashMap<String, SessionOwner>, std::collections::VecDeque<String>)>);

impl SessionOwners {
    fn table(&self) -> std::sync::MutexGuard<'_, (std::collections::HashMap<String, SessionOwner>, std::collections::VecDeque<String>)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `who` may name session `id`: only the key that opened it.
    pub(crate) fn may_use(&self, id: &str, who: &SessionOwner) -> bool {
        self.table().0.get(id).is_some_and(|o| o == who)
    }

    /// Bind a session the MCP library just opened to `who`, forgetting the oldest past
    /// [`MCP_SESSIONS_MAX`].
    pub(crate) fn bind(&self, id: &str, who: SessionOwner) {
        let mut t = self.table();
        let (owners, order) = &mut *t;
        if owners.insert(id.to_owned(), who).is_none() {
            order.push_back(id.to_owned());
        }
        while owners.len() > MCP_SESSIONS_MAX {
            match order.pop_front() {
                Some(old) => {
                    owners.remove(&old);
                }
                None => break,
            }
        }
        // Ids already unbound linger in the order until they reach the front; bound them too.
        if order.len() > 2 * MCP_SESSIONS_MAX {
            order.retain(|i| owners.contains_key(i));
        }
        debug_assert!(owners.len() <= MCP_SESSIONS_MAX);
    }

    /// Forget a session that was closed.
    pub(crate) fn unbind(&self, id: &str) {
        self.table().0.remove(id);
    }
}

/// What the MCP library answers for a session it does not know, byte for byte: a foreign session
/// gets the same answer.
pub(crate) fn unknown_session_response() -> axum::response::Response {
    use axum::response::IntoResponse;
    (axum::http::StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}
