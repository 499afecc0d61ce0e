//! The lexical index: SQLite FTS5 with BM25 over every stored item's words, for hybrid search.
//!
//! It is a candidate generator only, never a source of truth: a hit names a row id, and the item
//! it returns is read back from `items` and verified against the log like every other read, then
//! filtered by the same permission check as vector search ([`MemoryItem::searchable_by`]). So an
//! edited index can change which eligible memories are proposed, never make an ineligible one
//! readable. It is kept in step inside the commit's transaction: an item's words are indexed when
//! its row is inserted and removed when it is erased (`secure-delete` is on, so an erased text's
//! terms leave the index at once rather than at the next merge).
//!
//! **Each term is scoped.** A word is indexed as its tenant's and namespace's [`scope_token`]
//! followed by the word, so a query for a word of one namespace reads that namespace's matches
//! only, and its document frequency (BM25's inverse document frequency) counts that namespace
//! only: another tenant's texts no longer change which words a query keeps or how they weigh
//! (BM25's document count and mean length are still over the whole index). Filtering by
//! tenant and namespace columns instead made FTS5 read every match's row (over half of a guarded
//! search's time at 10,000 memories, issue 36). The table keeps its scoped words: a
//! contentless table cannot remove a deleted row's terms at once (its deletes are tombstones
//! until a merge), and an erasure must leave no term behind.
//!
//! [`MemoryItem::searchable_by`]: memwarden_core::item::MemoryItem::searchable_by

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::StoreError;

/// Most query terms used (the rest are ignored).
pub const QUERY_TERMS_MAX: usize = 32;
/// Longest query term, in bytes (longer terms are ignored, and not indexed).
pub const QUERY_TERM_BYTES_MAX: usize = 64;
/// Hex digits of a [`scope_token`] (64 bits of SHA-256: two scopes sharing a token would only
/// propose each other's memories as candidates, which the read-back check drops).
const SCOPE_HEX_LEN: usize = 16;

const CREATE: &str = "
CREATE VIRTUAL TABLE items_fts USING fts5(terms, tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO items_fts(items_fts, rank) VALUES('secure-delete', 1);
";

/// The prefix that scopes every indexed word of a tenant's namespace: [`SCOPE_HEX_LEN`] hex
/// digits of SHA-256 over the tenant, a zero byte and the namespace.
pub(crate) fn scope_token(tenant: &str, namespace: &str) -> String {
    let mut h = Sha256::new();
    h.update(tenant.as_bytes());
    h.update([0u8]);
    h.update(namespace.as_bytes());
    let mut token = hex::encode(h.finalize());
    token.truncate(SCOPE_HEX_LEN);
    debug_assert_eq!(token.len(), SCOPE_HEX_LEN);
    debug_assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    token
}

/// The words of `text` as the index holds them: letters and digits, lower-cased, each at most
/// [`QUERY_TERM_BYTES_MAX`] bytes (longer ones can never be asked for), prefixed by `scope`.
fn scoped_words(scope: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty() && w.len() <= QUERY_TERM_BYTES_MAX) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(scope);
        out.push_str(&w.to_lowercase());
    }
    debug_assert!(out.is_empty() || out.starts_with(scope));
    out
}

/// Create the index if the store has none (a new store, or one written before it existed), or
/// rebuild it if it has an earlier layout (the text with tenant and namespace columns), and fill
/// it from the items already stored, in one transaction.
pub(crate) fn prepare(conn: &Connection) -> Result<(), StoreError> {
    let sql: Option<String> = conn.query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'items_fts'", [], |r| r.get(0)).optional()?;
    if sql.as_deref().is_some_and(|s| s.contains("fts5(terms,") && !s.contains("contentless")) {
        return Ok(());
    }
    let tx = conn.unchecked_transaction()?;
    if sql.is_some() {
        tx.execute_batch("DROP TABLE items_fts")?;
    }
    tx.execute_batch(CREATE)?;
    {
        let mut rows = tx.prepare("SELECT rowid, tenant, namespace, json_extract(record, '$.content') FROM items")?;
        let mut insert = tx.prepare("INSERT INTO items_fts(rowid, terms) VALUES (?1, ?2)")?;
        let mut it = rows.query([])?;
        while let Some(r) = it.next()? {
            let (rowid, tenant, namespace): (i64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let content: Option<String> = r.get(3)?;
            insert.execute(params![rowid, scoped_words(&scope_token(&tenant, &namespace), content.as_deref().unwrap_or_default())])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Index the words of the item row `id` (just inserted, in the same transaction).
pub(crate) fn index(conn: &Connection, id: &[u8], content: &str) -> rusqlite::Result<()> {
    let (rowid, tenant, namespace): (i64, String, String) =
        conn.prepare_cached("SELECT rowid, tenant, namespace FROM items WHERE id = ?1")?.query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    conn.prepare_cached("INSERT INTO items_fts(rowid, terms) VALUES (?1, ?2)")?.execute(params![rowid, scoped_words(&scope_token(&tenant, &namespace), content)])?;
    Ok(())
}

/// Remove the item row `id`'s words from the index (before the row is deleted).
pub(crate) fn unindex(conn: &Connection, id: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM items_fts WHERE rowid = (SELECT rowid FROM items WHERE id = ?1)")?.execute(params![id])?;
    Ok(())
}

/// English function words left out of a query: a match on "the" or "is" says nothing about
/// relevance, and on a small corpus BM25 still ranks it (a query about a meeting found a
/// sentence about a guitar through "is" and "the").
pub const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before",
    "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each",
    "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "s", "t", "d", "ll", "m", "re", "ve",
];

/// The words of a free-text query: letters and digits, lower-cased, [`STOPWORDS`] left out,
/// duplicates dropped, at most [`QUERY_TERMS_MAX`] of at most [`QUERY_TERM_BYTES_MAX`] bytes.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() || w.len() > QUERY_TERM_BYTES_MAX {
            continue;
        }
        let w = w.to_lowercase();
        if STOPWORDS.contains(&w.as_str()) {
            continue;
        }
        if !terms.contains(&w) {
            terms.push(w);
        }
        if terms.len() >= QUERY_TERMS_MAX {
            break;
        }
    }
    terms
}

fn quoted_any(terms: &[String]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    Some(terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// The FTS5 query for free text: its words ([`query_terms`]), each quoted so no query syntax
/// survives, any of which may match. `None` when the text has no such word.
pub fn match_query(text: &str) -> Option<String> {
    quoted_any(&query_terms(text))
}

/// A query term matching more than this many memories of the namespace is left out of the
/// lexical query: ranking costs time in proportion to the matches (a term in every memory, such
/// as a speaker's name in a transcript, made one search rank all 10,000 rows: 9 ms), and such a
/// term tells the memories little apart (its inverse document frequency is near zero); the
/// vector search still sees the whole query.
///
/// Known limit: the count is over the namespace's memories, whoever may read them (counting
/// only what the reader may read would mean reading every match), so whether a lexical query
/// uses a word tells a reader whether more than this many memories of the namespace contain it.
/// Nothing else is disclosed: every proposed memory is still read back, verified and filtered
/// for the reader.
pub const TERM_MATCHES_MAX: usize = 512;

/// [`match_query`] without the terms that match more than [`TERM_MATCHES_MAX`] of the
/// namespace's memories, or that match none (each counted up to the limit, without ranking).
/// `None` when no term is left: the lexical search then proposes nothing.
pub(crate) fn selective_query(conn: &Connection, tenant: &str, namespace: &str, text: &str) -> Result<Option<String>, StoreError> {
    let scope = scope_token(tenant, namespace);
    // The limit is written into the statement, not bound: a bound LIMIT over a virtual table
    // makes SQLite re-prepare the statement at every binding (7% of a search's time).
    let mut stmt = conn.prepare_cached(&format!("SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ?1 LIMIT {})", TERM_MATCHES_MAX + 1))?;
    let mut kept = Vec::new();
    for t in query_terms(text) {
        let scoped = format!("{scope}{t}");
        let n: i64 = stmt.query_row(params![format!("\"{scoped}\"")], |r| r.get(0))?;
        if n > 0 && usize::try_from(n).unwrap_or(usize::MAX) <= TERM_MATCHES_MAX {
            kept.push(scoped);
        }
    }
    debug_assert!(kept.len() <= QUERY_TERMS_MAX);
    Ok(quoted_any(&kept))
}

/// Row ids of the items whose words match `query` (from [`selective_query`], whose terms name
/// the tenant's namespace) with their BM25 score (higher is better; FTS5's `rank` is its
/// negation), best first, at most `limit`.
pub(crate) fn candidates(conn: &Connection, query: &str, limit: usize) -> Result<Vec<(i64, f64)>, StoreError> {
    // The limit is written into the statement (see [`selective_query`]); a search asks for a
    // few distinct limits only (`4k`, widened by 4), each a cached statement.
    let mut stmt = conn.prepare_cached(&format!("SELECT rowid, rank FROM items_fts WHERE items_fts MATCH ?1 ORDER BY rank, rowid LIMIT {limit}"))?;
    let rows = stmt.query_map(params![query], |r| Ok((r.get::<_, i64>(0)?, -r.get::<_, f64>(1)?)))?;
    let out: Vec<(i64, f64)> = rows.collect::<Result<_, _>>()?;
    debug_assert!(out.len() <= limit);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::match_query;

    /// A word in more than [`super::TERM_MATCHES_MAX`] memories of the namespace leaves the
    /// query (it would make the search rank every one of them); one in fewer stays; a query of
    /// frequent words only proposes nothing; another namespace's memories do not count.
    #[test]
    fn terms_in_too_many_memories_leave_the_query() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE items (id BLOB, record TEXT, tenant TEXT, namespace TEXT);").unwrap();
        super::prepare(&conn).unwrap();
        let add = |n: usize, ns: &str, text: &str| {
            let words = super::scoped_words(&super::scope_token("t", ns), text);
            conn.execute("INSERT INTO items_fts(rowid, terms) VALUES (?1, ?2)", rusqlite::params![n as i64, words]).unwrap();
        };
        for n in 0..=super::TERM_MATCHES_MAX {
            add(n, "a", &format!("caroline said note {n}"));
        }
        add(10_000, "a", "caroline adopted a zebra");
        for n in 0..2 * super::TERM_MATCHES_MAX {
            add(20_000 + n, "b", "zebra zebra");
        }
        let scope = super::scope_token("t", "a");
        let q = |text: &str| super::selective_query(&conn, "t", "a", text).unwrap().map(|q| q.replace(&scope, ""));
        // `caroline` is in 514 memories of `a`, `adopt` in none (no stemming), `zebra` in one
        // (the 1,024 of namespace `b` do not count).
        assert_eq!(q("What did Caroline adopt, a zebra?").as_deref(), Some("\"zebra\""));
        assert_eq!(q("What did Caroline adopted").as_deref(), Some("\"adopted\""));
        assert_eq!(q("caroline said"), None);
        assert_eq!(q("note 7").as_deref(), Some("\"7\""));
        // A text spelling another scope's words does not reach that scope.
        add(30_000, "c", &format!("{scope}zebra"));
        assert_eq!(q(&format!("{scope}zebra")), None);
        let rows = super::candidates(&conn, &super::selective_query(&conn, "t", "a", "zebra").unwrap().unwrap(), 10).unwrap();
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), vec![10_000]);
        // A deleted row's words leave the index (erasure).
        conn.execute("DELETE FROM items_fts WHERE rowid = 10000", []).unwrap();
        assert_eq!(q("zebra"), None);
    }

    #[test]
    fn queries_keep_words_only() {
        let check = |text: &str, want: Option<&str>| assert_eq!(match_query(text).as_deref(), want, "{text:?}");
        check("", None);
        check("  ?! ", None);
        check("Where is the offsite?", Some("\"offsite\""));
        check("the of is", None);
        // FTS5 syntax is never passed through.
        check("x\" OR content:* NEAR(", Some("\"x\" OR \"content\" OR \"near\""));
        check("Café café", Some("\"café\""));
        let long = "x".repeat(super::QUERY_TERM_BYTES_MAX + 1);
        check(&format!("{long} ok"), Some("\"ok\""));
        let many: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        assert_eq!(match_query(&many.join(" ")).map(|q| q.matches(" OR ").count() + 1), Some(super::QUERY_TERMS_MAX));
    }
}
