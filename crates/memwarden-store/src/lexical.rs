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
//! only: another tenant's texts no longer change which words a query keeps or how they weigh.
//!
//! **BM25 is the scope's own** (issue 35.8). FTS5's `bm25()` counts documents and mean length
//! over the whole table, every tenant's rows included; so [`ranked`] computes the same formula
//! (FTS5's k1 and b) from the scope's own document and word counts (`items_fts_stats`), each
//! row's length (`items_fts_len`) and term frequencies (`items_fts_vocab`, an `fts5vocab`
//! instance table). One table per tenant was tried and reverted: with thousands of tenants every
//! schema change re-parsed thousands of tables. Filtering by
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

/// BM25's parameters, FTS5's own (so one scope's ranking is FTS5's ranking of that scope).
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;
/// The smallest inverse document frequency a matched term weighs (FTS5's floor).
const BM25_IDF_MIN: f64 = 1e-6;

/// The index (`items_fts`), a view of its terms' instances (`items_fts_vocab`: term frequency
/// per row), each row's scope and word count (`items_fts_len`) and each scope's document and
/// word count (`items_fts_stats`), so BM25's statistics are the searched scope's own.
const CREATE: &str = "
CREATE VIRTUAL TABLE items_fts USING fts5(terms, tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO items_fts(items_fts, rank) VALUES('secure-delete', 1);
CREATE VIRTUAL TABLE items_fts_vocab USING fts5vocab(items_fts, instance);
CREATE TABLE items_fts_len (rowid INTEGER PRIMARY KEY, scope TEXT NOT NULL, words INTEGER NOT NULL);
CREATE TABLE items_fts_stats (scope TEXT PRIMARY KEY, docs INTEGER NOT NULL, words INTEGER NOT NULL);
";
const DROP: &str = "
DROP TABLE IF EXISTS items_fts_vocab;
DROP TABLE IF EXISTS items_fts;
DROP TABLE IF EXISTS items_fts_len;
DROP TABLE IF EXISTS items_fts_stats;
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
/// [`QUERY_TERM_BYTES_MAX`] bytes (longer ones can never be asked for), prefixed by `scope`;
/// and how many there are.
fn scoped_words(scope: &str, text: &str) -> (String, i64) {
    let mut out = String::with_capacity(text.len() * 2);
    let mut words = 0i64;
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty() && w.len() <= QUERY_TERM_BYTES_MAX) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(scope);
        out.push_str(&w.to_lowercase());
        words += 1;
    }
    debug_assert!(out.is_empty() || out.starts_with(scope));
    debug_assert_eq!(words == 0, out.is_empty());
    (out, words)
}

/// Create the index if the store has none (a new store, or one written before it existed), or
/// rebuild it if it has an earlier layout (the text with tenant and namespace columns, or scoped
/// terms without per-scope statistics), and fill it from the items already stored, in one
/// transaction.
pub(crate) fn prepare(conn: &Connection) -> Result<(), StoreError> {
    let sql: Option<String> = conn.query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'items_fts'", [], |r| r.get(0)).optional()?;
    let stats: i64 = conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('items_fts_stats', 'items_fts_len', 'items_fts_vocab')", [], |r| r.get(0))?;
    if sql.as_deref().is_some_and(|s| s.contains("fts5(terms,") && !s.contains("contentless")) && stats == 3 {
        return Ok(());
    }
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(DROP)?;
    tx.execute_batch(CREATE)?;
    {
        let mut rows = tx.prepare("SELECT rowid, tenant, namespace, json_extract(record, '$.content') FROM items")?;
        let mut it = rows.query([])?;
        while let Some(r) = it.next()? {
            let (rowid, tenant, namespace): (i64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let content: Option<String> = r.get(3)?;
            insert_row(&tx, rowid, &scope_token(&tenant, &namespace), content.as_deref().unwrap_or_default())?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Index `content` as row `rowid` of `scope`: its scoped words, its word count, and the scope's
/// counts.
fn insert_row(conn: &Connection, rowid: i64, scope: &str, content: &str) -> rusqlite::Result<()> {
    let (terms, words) = scoped_words(scope, content);
    debug_assert!(words == 0 || terms.starts_with(scope));
    conn.prepare_cached("INSERT INTO items_fts(rowid, terms) VALUES (?1, ?2)")?.execute(params![rowid, terms])?;
    conn.prepare_cached("INSERT INTO items_fts_len(rowid, scope, words) VALUES (?1, ?2, ?3)")?.execute(params![rowid, scope, words])?;
    conn.prepare_cached(
        "INSERT INTO items_fts_stats(scope, docs, words) VALUES (?1, 1, ?2)
         ON CONFLICT(scope) DO UPDATE SET docs = docs + 1, words = words + excluded.words",
    )?
    .execute(params![scope, words])?;
    Ok(())
}

/// Index the words of the item row `id` (just inserted, in the same transaction).
pub(crate) fn index(conn: &Connection, id: &[u8], content: &str) -> rusqlite::Result<()> {
    let (rowid, tenant, namespace): (i64, String, String) =
        conn.prepare_cached("SELECT rowid, tenant, namespace FROM items WHERE id = ?1")?.query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    insert_row(conn, rowid, &scope_token(&tenant, &namespace), content)
}

/// Remove the item row `id`'s words from the index, and its counts from its scope's (before the
/// row is deleted).
pub(crate) fn unindex(conn: &Connection, id: &[u8]) -> rusqlite::Result<()> {
    let Some(rowid): Option<i64> = conn.prepare_cached("SELECT rowid FROM items WHERE id = ?1")?.query_row(params![id], |r| r.get(0)).optional()? else {
        return Ok(());
    };
    let len: Option<(String, i64)> = conn.prepare_cached("SELECT scope, words FROM items_fts_len WHERE rowid = ?1")?.query_row(params![rowid], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    conn.prepare_cached("DELETE FROM items_fts WHERE rowid = ?1")?.execute(params![rowid])?;
    if let Some((scope, words)) = len {
        conn.prepare_cached("DELETE FROM items_fts_len WHERE rowid = ?1")?.execute(params![rowid])?;
        conn.prepare_cached("UPDATE items_fts_stats SET docs = docs - 1, words = words - ?2 WHERE scope = ?1")?.execute(params![scope, words])?;
        conn.prepare_cached("DELETE FROM items_fts_stats WHERE scope = ?1 AND docs <= 0")?.execute(params![scope])?;
    }
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

/// The matches of `text`'s words ([`query_terms`]) among the tenant's namespace's memories,
/// ranked by BM25 over that namespace's own statistics (its document count, mean length and each
/// word's document frequency), best first, ties by row id: `(row id, score)`, higher is better.
///
/// A word matching more than [`TERM_MATCHES_MAX`] of the namespace's memories, or none, is left
/// out (each counted up to the limit, without ranking). Another tenant's or namespace's texts
/// change no score (issue 35.8). Empty when no word is left.
pub(crate) fn ranked(conn: &Connection, tenant: &str, namespace: &str, text: &str) -> Result<Vec<(i64, f64)>, StoreError> {
    let scope = scope_token(tenant, namespace);
    let stats: Option<(i64, i64)> = conn.prepare_cached("SELECT docs, words FROM items_fts_stats WHERE scope = ?1")?.query_row(params![scope], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    let Some((docs, words)) = stats.filter(|s| s.0 > 0) else { return Ok(Vec::new()) };
    let docs_f = docs as f64;
    let avgdl = (words.max(1) as f64) / docs_f;
    // The limit is written into the statement, not bound: a bound LIMIT over a virtual table
    // makes SQLite re-prepare the statement at every binding (7% of a search's time).
    let mut count = conn.prepare_cached(&format!("SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ?1 LIMIT {})", TERM_MATCHES_MAX + 1))?;
    let mut scores: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
    for t in query_terms(text) {
        let scoped = format!("{scope}{t}");
        let n: i64 = count.query_row(params![format!("\"{scoped}\"")], |r| r.get(0))?;
        if n == 0 || usize::try_from(n).unwrap_or(usize::MAX) > TERM_MATCHES_MAX {
            continue;
        }
        let n_f = n as f64;
        let idf = ((docs_f - n_f + 0.5) / (n_f + 0.5)).ln().max(BM25_IDF_MIN);
        for (rowid, tf, dl) in term_rows(conn, &scoped)? {
            let tf = tf as f64;
            let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * (dl as f64) / avgdl);
            *scores.entry(rowid).or_insert(0.0) += idf * tf * (BM25_K1 + 1.0) / (tf + norm);
        }
    }
    let mut out: Vec<(i64, f64)> = scores.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    debug_assert!(out.len() <= QUERY_TERMS_MAX * TERM_MATCHES_MAX);
    debug_assert!(out.iter().all(|(_, s)| s.is_finite() && *s > 0.0));
    Ok(out)
}

/// The rows holding the scoped word `scoped`: `(row id, occurrences, the row's word count)`. The
/// index holds words folded (lower case, no diacritics); a query word that is not in that form
/// is found through a match instead, counted once per row.
fn term_rows(conn: &Connection, scoped: &str) -> Result<Vec<(i64, i64, i64)>, StoreError> {
    let read = |sql: &str, arg: &str| -> Result<Vec<(i64, i64, i64)>, StoreError> {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params![arg], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let exact = read(
        "SELECT v.doc, count(*), l.words FROM items_fts_vocab v JOIN items_fts_len l ON l.rowid = v.doc WHERE v.term = ?1 GROUP BY v.doc",
        scoped,
    )?;
    if !exact.is_empty() {
        return Ok(exact);
    }
    read("SELECT f.rowid, 1, l.words FROM items_fts f JOIN items_fts_len l ON l.rowid = f.rowid WHERE items_fts MATCH ?1", &format!("\"{scoped}\""))
}

#[cfg(test)]
mod tests {
    use super::match_query;


    fn index() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE items (id BLOB, record TEXT, tenant TEXT, namespace TEXT);").unwrap();
        super::prepare(&conn).unwrap();
        conn
    }

    fn add(conn: &rusqlite::Connection, rowid: usize, tenant: &str, ns: &str, text: &str) {
        super::insert_row(conn, rowid as i64, &super::scope_token(tenant, ns), text).unwrap();
    }

    fn ids(rows: &[(i64, f64)]) -> Vec<i64> {
        rows.iter().map(|r| r.0).collect()
    }

    /// A word in more than [`super::TERM_MATCHES_MAX`] memories of the namespace leaves the
    /// query (it would make the search rank every one of them); one in fewer stays; a query of
    /// frequent words only proposes nothing; another namespace's memories do not count.
    #[test]
    fn terms_in_too_many_memories_leave_the_query() {
        let conn = index();
        for n in 0..=super::TERM_MATCHES_MAX {
            add(&conn, n, "t", "a", &format!("caroline said note {n}"));
        }
        add(&conn, 10_000, "t", "a", "caroline adopted a zebra");
        for n in 0..2 * super::TERM_MATCHES_MAX {
            add(&conn, 20_000 + n, "t", "b", "zebra zebra");
        }
        let q = |text: &str| ids(&super::ranked(&conn, "t", "a", text).unwrap());
        // `caroline` is in 514 memories of `a`, `adopt` in none (no stemming), `zebra` in one
        // (the 1,024 of namespace `b` do not count).
        assert_eq!(q("What did Caroline adopt, a zebra?"), vec![10_000]);
        assert_eq!(q("What did Caroline adopted"), vec![10_000]);
        assert!(q("caroline said").is_empty());
        assert_eq!(q("note 7"), vec![7]);
        // A text spelling another scope's words does not reach that scope.
        let scope = super::scope_token("t", "a");
        add(&conn, 30_000, "t", "c", &format!("{scope}zebra"));
        assert!(q(&format!("{scope}zebra")).is_empty());
        // A deleted row's words leave the index (erasure), and its counts leave the scope's.
        conn.execute("INSERT INTO items(id, tenant, namespace) VALUES (x'01', 't', 'a')", []).unwrap();
        conn.execute("UPDATE items SET rowid = 10000 WHERE id = x'01'", []).unwrap();
        let docs = |scope: &str| -> i64 { conn.query_row("SELECT docs FROM items_fts_stats WHERE scope = ?1", [scope], |r| r.get(0)).unwrap() };
        let before = docs(&scope);
        super::unindex(&conn, &[1]).unwrap();
        assert!(q("zebra").is_empty());
        assert_eq!(docs(&scope), before - 1);
    }

    /// Within one scope the ranking is FTS5's own BM25 (the reference), scores included; a word
    /// written with diacritics still finds its folded form.
    #[test]
    fn one_scopes_ranking_is_fts5s_bm25() {
        let conn = index();
        let texts = [
            "the ledger export ships on friday",
            "ledger totals for march and april ledger",
            "export the invoices to the archive",
            "a much longer note about the ledger with many many other words in it",
            "café opening hours",
        ];
        for (n, t) in texts.iter().enumerate() {
            add(&conn, n + 1, "t", "a", t);
        }
        let scope = super::scope_token("t", "a");
        for query in ["ledger export", "ledger", "export archive friday", "cafe hours"] {
            let mine = super::ranked(&conn, "t", "a", query).unwrap();
            let words: Vec<String> = super::query_terms(query).iter().map(|w| format!("\"{scope}{w}\"")).collect();
            let mut stmt = conn.prepare("SELECT rowid, -rank FROM items_fts WHERE items_fts MATCH ?1 ORDER BY rank, rowid").unwrap();
            let want: Vec<(i64, f64)> = stmt.query_map([words.join(" OR ")], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
            assert_eq!(ids(&mine), ids(&want), "{query}");
            for (m, w) in mine.iter().zip(&want) {
                assert!((m.1 - w.1).abs() < 1e-9 * w.1.abs().max(1.0), "{query}: {m:?} vs {w:?}");
            }
        }
        assert_eq!(ids(&super::ranked(&conn, "t", "a", "Café").unwrap()), vec![5]);
    }

    /// Issue 35.8, regression: BM25's document count and mean length spanned every tenant, so
    /// another tenant's texts moved a tenant's scores. Now they change nothing.
    #[test]
    fn regression_another_tenants_texts_moved_a_tenants_bm25_scores() {
        let conn = index();
        for (n, t) in ["the ledger export ships on friday", "ledger totals for march", "export the invoices"].iter().enumerate() {
            add(&conn, n + 1, "acme", "notes", t);
        }
        let before = super::ranked(&conn, "acme", "notes", "ledger export").unwrap();
        assert_eq!(before.len(), 3);
        for n in 100..400 {
            let text = if n % 2 == 0 { format!("ledger ledger ledger entry {n}") } else { format!("a much longer note about nothing in particular number {n} with many words") };
            add(&conn, n, "globex", "notes", &text);
        }
        assert_eq!(super::ranked(&conn, "acme", "notes", "ledger export").unwrap(), before);
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
