//! The SQL seam between the shared write path and a database: what [`crate::write`]'s
//! mutation code and [`crate::audit`] need from a connection, so the embedded SQLite backend and
//! the PostgreSQL backend (`memwarden-store-pg`) run the *same* code for every mutation, its row
//! bindings and its log entries. Statements are written once, with `?N` placeholders and SQL both
//! databases accept (`ON CONFLICT ... DO NOTHING / DO UPDATE`, no `INSERT OR IGNORE`); a
//! backend translates placeholders if its driver needs to. What differs between the databases
//! (vector keys, the lexical index, how a log entry row is stored) is a method of [`Db`].

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

/// One statement argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<'a> {
    /// SQL NULL.
    Null,
    /// A 64-bit integer (`INTEGER` / `BIGINT`).
    Int(i64),
    /// A double (`REAL` / `DOUBLE PRECISION`).
    Real(f64),
    /// Text.
    Text(&'a str),
    /// Bytes (`BLOB` / `BYTEA`).
    Blob(&'a [u8]),
}

/// A value that can be bound as an [`Arg`] (what [`args!`](crate::args) takes).
pub trait AsArg {
    /// This value as an argument.
    fn as_arg(&self) -> Arg<'_>;
}

impl AsArg for i64 {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Int(*self)
    }
}
impl AsArg for f64 {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Real(*self)
    }
}
impl AsArg for str {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}
impl AsArg for String {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}
impl AsArg for [u8] {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}
impl AsArg for Vec<u8> {
    fn as_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}
impl<T: AsArg + ?Sized> AsArg for &T {
    fn as_arg(&self) -> Arg<'_> {
        (**self).as_arg()
    }
}
impl<T: AsArg> AsArg for Option<T> {
    fn as_arg(&self) -> Arg<'_> {
        self.as_ref().map_or(Arg::Null, AsArg::as_arg)
    }
}

/// `args![a, b, ...]`: a slice of [`Arg`]s.
#[macro_export]
#[doc(hidden)]
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$($crate::backend::AsArg::as_arg(&$a)),*][..] };
}

/// A database error, as the shared code needs to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    /// A uniqueness (or other constraint) violation: the shared code answers some of these as a
    /// [`crate::CommitError`] (`ItemExists`, `PrincipalExists`, `GrantAlreadyUsed`).
    pub constraint: bool,
    /// The driver's message.
    pub message: String,
}

impl DbError {
    /// An error that is not a constraint violation.
    pub fn other(message: impl Into<String>) -> Self {
        Self { constraint: false, message: message.into() }
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DbError {}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        let constraint = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation);
        Self { constraint, message: e.to_string() }
    }
}

/// The columns of one result row, by position.
pub trait Cols {
    /// A non-null integer.
    fn int(&self, i: usize) -> Result<i64, DbError>;
    /// A nullable integer.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, DbError>;
    /// A non-null double.
    fn real(&self, i: usize) -> Result<f64, DbError>;
    /// Non-null text.
    fn text(&self, i: usize) -> Result<String, DbError>;
    /// Nullable text.
    fn opt_text(&self, i: usize) -> Result<Option<String>, DbError>;
    /// Non-null bytes.
    fn blob(&self, i: usize) -> Result<Vec<u8>, DbError>;
    /// Nullable bytes.
    fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, DbError>;
}

impl Cols for rusqlite::Row<'_> {
    fn int(&self, i: usize) -> Result<i64, DbError> {
        Ok(self.get(i)?)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, DbError> {
        Ok(self.get(i)?)
    }
    fn real(&self, i: usize) -> Result<f64, DbError> {
        Ok(self.get(i)?)
    }
    fn text(&self, i: usize) -> Result<String, DbError> {
        Ok(self.get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, DbError> {
        Ok(self.get(i)?)
    }
    fn blob(&self, i: usize) -> Result<Vec<u8>, DbError> {
        Ok(self.get(i)?)
    }
    fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, DbError> {
        Ok(self.get(i)?)
    }
}

/// What the shared write path and audit need from a connection (inside the backend's
/// transaction).
pub trait Db {
    /// Run a statement (`?N` placeholders; none: a batch of statements, e.g. `SAVEPOINT op`);
    /// returns the number of rows changed.
    fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize, DbError>;
    /// Run a query, calling `each` on every row in order.
    fn query(&self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Cols) -> Result<(), DbError>) -> Result<(), DbError>;
    /// The column that orders a table's rows by insertion, for audits that report the first bad
    /// row (`rowid` on SQLite).
    fn row_order(&self) -> &'static str;
    /// Store the vector key of a new item with an embedding and return it. `next_index` is the
    /// index its write entry takes in its tenant's log (unique in the tenant, never reused).
    fn insert_vector(&self, id: &[u8], tenant: &str, namespace: &str, next_index: u64) -> Result<u64, DbError>;
    /// Record the store's vector dimension (with its first vector).
    fn record_dims(&self, dims: usize) -> Result<(), DbError>;
    /// Index the text of the item row `id` (just inserted) for lexical search.
    fn index_text(&self, id: &[u8], content: &str) -> Result<(), DbError>;
    /// Remove the item row `id`'s text from the lexical index (before the row is deleted).
    fn unindex_text(&self, id: &[u8]) -> Result<(), DbError>;
    /// Store a tenant log entry: index `idx` of `tenant`'s log; `gseq` is its place in the
    /// store's global view (a backend without a global order ignores it).
    fn append_entry(&self, tenant: &str, idx: u64, entry: &[u8], gseq: u64) -> Result<(), DbError>;
}

/// The first row of a query, read with `read`.
pub fn query_opt<T>(db: &dyn Db, sql: &str, args: &[Arg<'_>], read: impl Fn(&dyn Cols) -> Result<T, DbError>) -> Result<Option<T>, DbError> {
    let mut out = None;
    db.query(sql, args, &mut |r| {
        if out.is_none() {
            out = Some(read(r)?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Every row of a query, read with `read`.
pub fn query_all<T>(db: &dyn Db, sql: &str, args: &[Arg<'_>], read: impl Fn(&dyn Cols) -> Result<T, DbError>) -> Result<Vec<T>, DbError> {
    let mut out = Vec::new();
    db.query(sql, args, &mut |r| {
        out.push(read(r)?);
        Ok(())
    })?;
    Ok(out)
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Arg::Null => ValueRef::Null,
            Arg::Int(v) => ValueRef::Integer(v),
            Arg::Real(v) => ValueRef::Real(v),
            Arg::Text(s) => ValueRef::Text(s.as_bytes()),
            Arg::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// The embedded backend's connection as a [`Db`] (statements are prepared once and cached).
pub(crate) struct SqliteDb<'c>(pub(crate) &'c Connection);

impl Db for SqliteDb<'_> {
    fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize, DbError> {
        if args.is_empty() && !sql.contains('?') {
            self.0.execute_batch(sql)?;
            return Ok(0);
        }
        Ok(self.0.prepare_cached(sql)?.execute(rusqlite::params_from_iter(args.iter()))?)
    }

    fn query(&self, sql: &str, args: &[Arg<'_>], each: &mut dyn FnMut(&dyn Cols) -> Result<(), DbError>) -> Result<(), DbError> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
        while let Some(r) = rows.next()? {
            each(r)?;
        }
        Ok(())
    }

    fn row_order(&self) -> &'static str {
        "rowid"
    }

    fn insert_vector(&self, id: &[u8], tenant: &str, namespace: &str, _next_index: u64) -> Result<u64, DbError> {
        self.execute("INSERT INTO vectors(id, tenant, namespace) VALUES(?1, ?2, ?3)", crate::args![id, tenant, namespace])?;
        u64::try_from(self.0.last_insert_rowid()).map_err(|_| DbError::other("negative vector sequence"))
    }

    fn record_dims(&self, dims: usize) -> Result<(), DbError> {
        self.execute("INSERT INTO meta(key, value) VALUES('vector_dims', ?1)", crate::args![dims as i64]).map(|_| ())
    }

    fn index_text(&self, id: &[u8], content: &str) -> Result<(), DbError> {
        Ok(crate::lexical::index(self.0, id, content)?)
    }

    fn unindex_text(&self, id: &[u8]) -> Result<(), DbError> {
        Ok(crate::lexical::unindex(self.0, id)?)
    }

    fn append_entry(&self, tenant: &str, idx: u64, entry: &[u8], gseq: u64) -> Result<(), DbError> {
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.execute("INSERT INTO log(tenant, idx, entry, gseq) VALUES(?1, ?2, ?3, ?4)", crate::args![tenant, i(idx), entry, i(gseq)]).map(|_| ())
    }
}
