//! One PostgreSQL connection with a statement cache, and its [`Db`] adapter: the shared write
//! path's `?N` statements run here as `$N`, each argument bound with the type the server
//! inferred for its parameter (so a NULL needs no type of its own).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use memwarden_store::StoreError;
use memwarden_store::backend::{Arg, Cols, Db, DbError};
use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls, Row, Statement};

/// A connection, its schema (`search_path`) and its prepared statements; reconnects when the
/// server dropped it (see [`Conn::begin`]).
pub(crate) struct Conn {
    /// `None` until first used, and after the server dropped it.
    client: Option<Client>,
    cache: HashMap<String, Statement>,
    url: String,
    schema: String,
    /// The server dropped the connection during the last call that failed (see
    /// [`Conn::take_dropped`]).
    dropped: bool,
}

/// Requests this process has sent to PostgreSQL (each a round trip: a statement prepared, a
/// query or statement run, a batch), over every connection of every store.
static ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);

/// See [`crate::round_trips`].
pub(crate) fn round_trips() -> u64 {
    ROUND_TRIPS.load(Ordering::Relaxed)
}

fn count_round_trip() {
    ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
}

/// The `application_name` of a store's connections (so an operator can find them in
/// `pg_stat_activity`).
pub(crate) fn application_name(schema: &str) -> String {
    format!("memwarden/{schema}")
}

/// A driver error as the shared code sees it.
pub(crate) fn db_err(e: &postgres::Error) -> DbError {
    let constraint = e.code().is_some_and(|c| *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::INTEGRITY_CONSTRAINT_VIOLATION);
    DbError { constraint, message: pg_message(e) }
}

/// The message of a driver error, with the server's detail when there is one.
pub(crate) fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("postgres: {} ({})", d.message(), d.code().code()),
        None => format!("postgres: {e}"),
    }
}

pub(crate) fn store_err(e: &postgres::Error) -> StoreError {
    StoreError::Database(pg_message(e))
}

pub(crate) fn store_db_err(e: DbError) -> StoreError {
    StoreError::Database(e.message)
}

/// `"name"`, quoted as a PostgreSQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `?N` placeholders as `$N` (no statement of the store has a `?` inside a literal).
fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// An argument as the parameter type the server expects.
fn bind<'a>(arg: &Arg<'a>, ty: &Type) -> Result<Box<dyn ToSql + Sync + 'a>, DbError> {
    Ok(match *arg {
        Arg::Int(v) if *ty == Type::INT4 => Box::new(i32::try_from(v).map_err(|_| DbError::other(format!("{v} does not fit an int4 parameter")))?),
        Arg::Int(v) if *ty == Type::INT2 => Box::new(i16::try_from(v).map_err(|_| DbError::other(format!("{v} does not fit an int2 parameter")))?),
        Arg::Int(v) => Box::new(v),
        Arg::Real(v) => Box::new(v),
        Arg::Text(s) => Box::new(s),
        Arg::Blob(b) => Box::new(b),
        Arg::Null => match *ty {
            Type::INT8 => Box::new(None::<i64>),
            Type::INT4 => Box::new(None::<i32>),
            Type::INT2 => Box::new(None::<i16>),
            Type::FLOAT8 => Box::new(None::<f64>),
            Type::BYTEA => Box::new(None::<Vec<u8>>),
            _ => Box::new(None::<String>),
        },
    })
}

impl Conn {
    /// Connect and use `schema` (which must exist, or be created by the caller right after).
    pub(crate) fn connect(url: &str, schema: &str) -> Result<Self, StoreError> {
        Ok(Self { client: Some(Self::client(url, schema)?), cache: HashMap::new(), url: url.to_owned(), schema: schema.to_owned(), dropped: false })
    }

    /// A connection opened on first use.
    pub(crate) fn lazy(url: &str, schema: &str) -> Self {
        Self { client: None, cache: HashMap::new(), url: url.to_owned(), schema: schema.to_owned(), dropped: false }
    }

    /// The client, connecting first if there is none.
    fn cl(&mut self) -> Result<&mut Client, DbError> {
        if self.client.is_none() {
            self.client = Some(Self::client(&self.url, &self.schema).map_err(|e| DbError::other(e.to_string()))?);
            self.cache.clear();
        }
        self.client.as_mut().ok_or_else(|| DbError::other("no connection"))
    }

    fn client(url: &str, schema: &str) -> Result<Client, StoreError> {
        let cannot = |e: &postgres::Error| StoreError::Database(format!("cannot connect to PostgreSQL at {url:?}: {}", pg_message(e)));
        let mut config: postgres::Config = url.parse().map_err(|e| cannot(&e))?;
        config.application_name(&application_name(schema));
        let mut client = config.connect(NoTls).map_err(|e| cannot(&e))?;
        client.batch_execute(&format!("SET search_path TO {}", quote_ident(schema))).map_err(|e| store_err(&e))?;
        Ok(client)
    }

    /// Reconnect if the connection is known to be closed (a call on it failed because the
    /// server dropped it).
    pub(crate) fn ready(&mut self) -> Result<(), StoreError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        self.cl().map(|_| ()).map_err(store_db_err)
    }

    /// Start a transaction with `sql` (`BEGIN ...`). If the server dropped the connection (a
    /// restart, an idle timeout, an operator's `pg_terminate_backend`), reconnect once and
    /// start again: nothing was sent on the dropped connection since its last transaction
    /// ended, so nothing is lost or applied twice. A connection that drops later, inside the
    /// transaction, fails that call (the caller hears an error, nothing was acknowledged) and
    /// the next call reconnects here.
    pub(crate) fn begin(&mut self, sql: &str) -> Result<(), StoreError> {
        count_round_trip();
        let client = self.cl().map_err(store_db_err)?;
        match client.batch_execute(sql) {
            Ok(()) => Ok(()),
            Err(e) if client.is_closed() || e.is_closed() || e.code() == Some(&SqlState::ADMIN_SHUTDOWN) => {
                self.client = None;
                self.cl().map_err(store_db_err)?.batch_execute(sql).map_err(|e| store_err(&e))
            }
            Err(e) => Err(store_err(&e)),
        }
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, DbError> {
        if let Some(s) = self.cache.get(sql) {
            return Ok(s.clone());
        }
        count_round_trip();
        let prepared = self.cl()?.prepare(&placeholders(sql));
        let s = prepared.map_err(|e| self.failed(&e))?;
        self.cache.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// Run statements without arguments (a transaction's `BEGIN`, `COMMIT`, a savepoint).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        count_round_trip();
        let out = self.cl()?.batch_execute(sql);
        out.map_err(|e| self.failed(&e))
    }

    /// Run one statement.
    pub(crate) fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, DbError> {
        let stmt = self.statement(sql)?;
        let boxed = Self::args(&stmt, args)?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| &**b as &(dyn ToSql + Sync)).collect();
        count_round_trip();
        let out = self.cl()?.execute(&stmt, &refs);
        out.map_err(|e| self.failed(&e))
    }

    /// Run one query.
    pub(crate) fn query(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, DbError> {
        let stmt = self.statement(sql)?;
        let boxed = Self::args(&stmt, args)?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| &**b as &(dyn ToSql + Sync)).collect();
        count_round_trip();
        let out = self.cl()?.query(&stmt, &refs);
        out.map_err(|e| self.failed(&e))
    }

    /// A call failed with `e`: if the server dropped the connection, forget it (the next call
    /// reconnects) and remember that it was dropped.
    fn failed(&mut self, e: &postgres::Error) -> DbError {
        if e.is_closed() || e.code() == Some(&SqlState::ADMIN_SHUTDOWN) || self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
            self.dropped = true;
        }
        db_err(e)
    }

    /// Whether the server dropped the connection in a call that failed since the last ask
    /// (a read that failed so may be run again on a new connection: reads are idempotent).
    pub(crate) fn take_dropped(&mut self) -> bool {
        std::mem::take(&mut self.dropped)
    }

    fn args<'a>(stmt: &Statement, args: &[Arg<'a>]) -> Result<Vec<Box<dyn ToSql + Sync + 'a>>, DbError> {
        if stmt.params().len() != args.len() {
            return Err(DbError::other(format!("statement takes {} parameters, {} given", stmt.params().len(), args.len())));
        }
        args.iter().zip(stmt.params()).map(|(a, t)| bind(a, t)).collect()
    }
}

/// A result row as [`Cols`].
pub(crate) struct PgRow<'r>(pub(crate) &'r Row);

fn col_err(i: usize, e: &postgres::Error) -> DbError {
    DbError::other(format!("column {i}: {e}"))
}

impl Cols for PgRow<'_> {
    fn int(&self, i: usize) -> Result<i64, DbError> {
        self.opt_int(i)?.ok_or_else(|| DbError::other(format!("column {i} is null")))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, DbError> {
        let ty = self.0.columns().get(i).map(|c| c.type_().clone()).ok_or_else(|| DbError::other(format!("no column {i}")))?;
        match ty {
            Type::INT4 => self.0.try_get::<_, Option<i32>>(i).map(|v| v.map(i64::from)),
            Type::INT2 => self.0.try_get::<_, Option<i16>>(i).map(|v| v.map(i64::from)),
            _ => self.0.try_get::<_, Option<i64>>(i),
        }
        .map_err(|e| col_err(i, &e))
    }
    fn real(&self, i: usize) -> Result<f64, DbError> {
        let ty = self.0.columns().get(i).map(|c| c.type_().clone()).ok_or_else(|| DbError::other(format!("no column {i}")))?;
        match ty {
            Type::FLOAT4 => self.0.try_get::<_, f32>(i).map(f64::from),
            _ => self.0.try_get::<_, f64>(i),
        }
        .map_err(|e| col_err(i, &e))
    }
    fn text(&self, i: usize) -> Result<String, DbError> {
        self.0.try_get(i).map_err(|e| col_err(i, &e))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, DbError> {
        self.0.try_get(i).map_err(|e| col_err(i, &e))
    }
    fn blob(&self, i: usize) -> Result<Vec<u8>, DbError> {
        self.0.try_get(i).map_err(|e| col_err(i, &e))
    }
    fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, DbError> {
        self.0.try_get(i).map_err(|e| col_err(i, &e))
    }
}

/// A connection inside a transaction, as the shared write path's [`Db`].
pub(crate) struct PgDb<'c> {
    conn: RefCell<&'c mut Conn>,
}

impl<'c> PgDb<'c> {
    pub(crate) fn new(conn: &'c mut Conn) -> Self {
        Self { conn: RefCell::new(conn) }
    }
}

impl Db for PgDb<'_> {
    fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize, DbError> {
        let mut c = self.conn.borrow_mut();
        if args.is_empty() && !sql.contains('?') {
            c.batch(sql)?;
            return Ok(0);
        }
        c.execute(sql, args).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn query(&self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Cols) -> Result<(), DbError>) -> Result<(), DbError> {
        let rows = self.conn.borrow_mut().query(sql, args)?;
        for r in &rows {
            each(&PgRow(r))?;
        }
        Ok(())
    }

    fn row_order(&self) -> &'static str {
        "ctid"
    }

    fn insert_vector(&self, id: &[u8], tenant: &str, namespace: &str, next_index: u64) -> Result<u64, DbError> {
        // The key is the log index of the item's write: unique in its tenant (and so in its
        // partition), never reused, and taken from no global sequence. A tenant imported from
        // another store kept its vector keys (they are part of its bound item rows); its later
        // keys are the log index plus the base recorded at import, above every imported key.
        let mut base = 0i64;
        let name = format!("vseq_base:{tenant}");
        self.query("SELECT value FROM meta WHERE key = ?1", &[Arg::Text(&name)], &mut |r| {
            base = r.text(0)?.parse().map_err(|_| DbError::other(format!("meta {name} is not a number")))?;
            Ok(())
        })?;
        let seq = i64::try_from(next_index).ok().and_then(|i| i.checked_add(base)).ok_or_else(|| DbError::other("vector key out of range"))?;
        self.execute("INSERT INTO vectors(tenant, seq, id, namespace) VALUES(?1, ?2, ?3, ?4)", &[Arg::Text(tenant), Arg::Int(seq), Arg::Blob(id), Arg::Text(namespace)])?;
        u64::try_from(seq).map_err(|_| DbError::other("negative vector key"))
    }

    fn record_dims(&self, dims: usize) -> Result<(), DbError> {
        let d = dims.to_string();
        self.execute("INSERT INTO meta(key, value) VALUES('vector_dims', ?1) ON CONFLICT (key) DO NOTHING", &[Arg::Text(&d)])?;
        let mut stored = None;
        self.query("SELECT value FROM meta WHERE key = 'vector_dims'", &[], &mut |r| {
            stored = Some(r.text(0)?);
            Ok(())
        })?;
        if stored.as_deref() != Some(d.as_str()) {
            return Err(DbError::other(format!("embedding of {dims} dimensions, but this store holds {}-dimensional vectors", stored.unwrap_or_default())));
        }
        Ok(())
    }

    fn index_text(&self, id: &[u8], content: &str) -> Result<(), DbError> {
        self.execute("UPDATE items SET fts = to_tsvector('simple', ?2) WHERE id = ?1", &[Arg::Blob(id), Arg::Text(content)]).map(|_| ())
    }

    fn unindex_text(&self, id: &[u8]) -> Result<(), DbError> {
        self.execute("UPDATE items SET fts = NULL WHERE id = ?1", &[Arg::Blob(id)]).map(|_| ())
    }

    fn append_entry(&self, tenant: &str, idx: u64, entry: &[u8], _gseq: u64) -> Result<(), DbError> {
        let idx = i64::try_from(idx).map_err(|_| DbError::other("log index out of range"))?;
        self.execute("INSERT INTO log(tenant, idx, entry) VALUES(?1, ?2, ?3)", &[Arg::Text(tenant), Arg::Int(idx), Arg::Blob(entry)]).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_numbered_dollars() {
        assert_eq!(super::placeholders("a = ?1 AND b = ?12 OR ?1 IS NULL"), "a = $1 AND b = $12 OR $1 IS NULL");
        assert_eq!(super::placeholders("SAVEPOINT op"), "SAVEPOINT op");
    }
}
