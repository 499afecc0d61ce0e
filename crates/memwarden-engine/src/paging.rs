//! Pages of every list (issue 39.5): an opaque cursor ([`memwarden_store::cursor`]) names where
//! the previous page stopped, bound to the list's route, the caller's tenant, the caller and the
//! query. A list of memories is read from the store after the cursor's position (keyset: a
//! page costs O(page)); the small bounded lists (a memory's versions, the tenant's elevations,
//! the server's principals and keys) are paged here over a stable order ([`page_sorted`]).
//!
//! Paging to the end over data that does not change yields every item once, in order; an item
//! written while paging appears if its position is after the cursor's (a new memory always is:
//! its `created_ms` is the latest).

use crate::{Actor, Candidate, Engine, EngineError, Listing, Read, ReadMemory, Withheld, WithheldMemory};
use memwarden_core::authority::Elevation;
use memwarden_core::prelude::*;
use memwarden_store::ListPosition;
use memwarden_store::cursor::{self, CursorRoute, CursorScope};

/// The most items one page holds (and the default of every list is [`PAGE_LIMIT_DEFAULT`]).
pub const PAGE_LIMIT_MAX: usize = 10_000;
/// Items per page when the caller does not say.
pub const PAGE_LIMIT_DEFAULT: usize = 100;

/// One page of a list: the items and the cursor of the next page (`None` on the last).
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// This page's items.
    pub items: T,
    /// Pass it back for the next page; `None` when this page is the last.
    pub next_cursor: Option<String>,
}

/// A page's `limit`, checked: 1..=[`PAGE_LIMIT_MAX`].
pub fn check_limit(limit: usize) -> Result<usize, EngineError> {
    if (1..=PAGE_LIMIT_MAX).contains(&limit) {
        Ok(limit)
    } else {
        Err(EngineError::Invalid(format!("limit must be 1..={PAGE_LIMIT_MAX}, got {limit}")))
    }
}

/// One page of `items` (sorted by `key`, keys unique): those whose key is after `after`, at most
/// `limit`, and the key to continue after when more remain.
pub fn page_sorted<T>(items: Vec<T>, key: impl Fn(&T) -> Vec<u8>, after: Option<&[u8]>, limit: usize) -> (Vec<T>, Option<Vec<u8>>) {
    debug_assert!(items.windows(2).all(|w| key(&w[0]) < key(&w[1])), "page_sorted needs items sorted by a unique key");
    let mut rest: Vec<T> = items.into_iter().filter(|i| after.is_none_or(|a| key(i).as_slice() > a)).collect();
    let more = rest.len() > limit;
    rest.truncate(limit);
    let next = if more { rest.last().map(&key) } else { None };
    (rest, next)
}

/// The sort key of an elevation in its list: creation time, then a digest of its identity (so
/// the cursor stays small and names no value).
fn elevation_key(e: &Elevation) -> Vec<u8> {
    let mut id = Vec::with_capacity(e.key.len() + e.value.canonical.len() + 16);
    for s in [e.key.as_str(), e.value.canonical.as_str(), e.value.exact.as_str()] {
        id.extend_from_slice(&(s.len() as u64).to_be_bytes());
        id.extend_from_slice(s.as_bytes());
    }
    id.extend_from_slice(format!("{:?}", e.value.kind).as_bytes());
    let mut k = e.created_ms.to_be_bytes().to_vec();
    k.extend_from_slice(&memwarden_log::leaf_hash(&id));
    k
}

impl Engine {
    /// Seal `position` into a cursor bound to `scope` (the server's own lists use it too).
    pub fn seal_cursor(&self, scope: &CursorScope<'_>, position: &[u8]) -> Result<String, EngineError> {
        cursor::seal(&self.store.cursor_key(), scope, position).map_err(EngineError::Cursor)
    }

    /// Open a cursor of `scope`: the position it holds, or [`EngineError::Cursor`].
    pub fn open_cursor(&self, scope: &CursorScope<'_>, cursor: &str) -> Result<Vec<u8>, EngineError> {
        cursor::open(&self.store.cursor_key(), scope, cursor).map_err(EngineError::Cursor)
    }

    fn actor_scope<'a>(actor: &'a Actor, route: CursorRoute, query: &'a str) -> CursorScope<'a> {
        CursorScope { route, tenant: actor.tenant().as_str(), caller: actor.id().as_str(), query }
    }

    /// One page of [`Engine::list_report`]: the memories of `namespace` after `cursor` (from the
    /// start without one), `limit` memories of the store's order scanned per page. The page's
    /// `withheld` names the withheld memories among those scanned, so over all pages every
    /// memory of the caller's scope is either listed or named withheld exactly once. A page
    /// may hold fewer than `limit` memories (even none) and still have a next page: memories the
    /// caller may not read take their place in the scan.
    pub fn list_page(&self, actor: &Actor, namespace: &Namespace, limit: usize, cursor: Option<&str>) -> Result<Page<Listing>, EngineError> {
        self.list_page_bound(actor, namespace, limit, cursor, "")
    }

    /// [`Engine::list_page`] whose cursors are also bound to `filters` (a door's own filters
    /// on the page, written canonically): a cursor of other filters is refused.
    pub fn list_page_bound(&self, actor: &Actor, namespace: &Namespace, limit: usize, cursor: Option<&str>, filters: &str) -> Result<Page<Listing>, EngineError> {
        let limit = check_limit(limit)?;
        let query = format!("namespace={}\nfilters={filters}", namespace.as_str());
        let scope = Self::actor_scope(actor, CursorRoute::Memories, &query);
        let after = match cursor {
            None => None,
            Some(c) => Some(ListPosition::from_bytes(&self.open_cursor(&scope, c)?).ok_or(EngineError::Cursor(cursor::CursorError::Malformed))?),
        };
        let mut items = self.store.list_after(actor.tenant(), namespace, after, limit + 1)?;
        let more = items.len() > limit;
        items.truncate(limit);
        let next_cursor = match (more, items.last()) {
            (true, Some(last)) => Some(self.seal_cursor(&scope, &ListPosition::of(last).to_bytes())?),
            _ => None,
        };
        Ok(Page { items: self.list_items(actor, items)?, next_cursor })
    }

    /// Run the read stages on `items` (a namespace's, in the list's order), hand the admitted
    /// ones to the actor's session and name the withheld ones.
    pub(crate) fn list_items(&self, actor: &Actor, items: Vec<MemoryItem>) -> Result<Listing, EngineError> {
        let now = self.now_ms();
        let mut fx = crate::pipeline::Effects::default();
        let mut candidates: Vec<Candidate> = self.views(actor.tenant(), items, true)?.into_iter().map(|v| Candidate::new(v, 0.0, 0.0)).collect();
        if let Err(e) = self.admit_reads(actor, Read::List, Integrity::Untrusted, &mut candidates, now, &mut fx) {
            return Err(self.refuse(actor.tenant(), now, fx, e));
        }
        let mut withheld = Vec::new();
        let mut handed = Vec::with_capacity(candidates.len());
        for c in candidates {
            match c.withheld {
                None => handed.push(c),
                Some(Withheld::Stage(hold)) => withheld.push(WithheldMemory::of(c.view.item.id(), hold)),
                Some(Withheld::Scope | Withheld::SessionFloor | Withheld::Cut) => {}
            }
        }
        self.hand_out(actor, Read::List, &handed, now, &mut fx)?;
        self.finish(actor.tenant(), now, fx)?;
        Ok(Listing { memories: handed.into_iter().map(|c| ReadMemory::of(c.view.item, c.risk)).collect(), withheld })
    }

    /// One page of [`Engine::history`]: the versions after `cursor`, at most `limit`. Only the
    /// page's versions count as handed to the actor's session.
    pub fn history_page(&self, actor: &Actor, id: &ItemId, limit: usize, cursor: Option<&str>) -> Result<Page<Vec<MemoryItem>>, EngineError> {
        let limit = check_limit(limit)?;
        let query = format!("id={id}");
        let scope = Self::actor_scope(actor, CursorRoute::History, &query);
        let after = cursor.map(|c| self.open_cursor(&scope, c)).transpose()?;
        let mut more = false;
        let versions = self.history_in(actor, id, &mut |chain: &[MemoryItem]| {
            let start = match &after {
                None => 0,
                // A version's id is unique in its chain; a chain only grows at its end.
                Some(a) => 1 + chain.iter().position(|v| v.id().as_bytes().as_slice() == a.as_slice()).ok_or(EngineError::Cursor(cursor::CursorError::Stale))?,
            };
            let end = start.saturating_add(limit).min(chain.len());
            more = end < chain.len();
            Ok(start.min(end)..end)
        })?;
        let next_cursor = match (more, versions.last()) {
            (true, Some(last)) => Some(self.seal_cursor(&scope, last.id().as_bytes())?),
            _ => None,
        };
        Ok(Page { items: versions, next_cursor })
    }

    /// One page of [`Engine::elevations`], ordered by creation time.
    pub fn elevations_page(&self, actor: &Actor, limit: usize, cursor: Option<&str>) -> Result<Page<Vec<(Elevation, bool)>>, EngineError> {
        let limit = check_limit(limit)?;
        let scope = Self::actor_scope(actor, CursorRoute::Elevations, "");
        let after = cursor.map(|c| self.open_cursor(&scope, c)).transpose()?;
        let mut all = self.elevations(actor)?;
        all.sort_by_cached_key(|(e, _)| elevation_key(e));
        all.dedup_by(|a, b| elevation_key(&a.0) == elevation_key(&b.0));
        let (items, next) = page_sorted(all, |(e, _)| elevation_key(e), after.as_deref(), limit);
        let next_cursor = next.map(|p| self.seal_cursor(&scope, &p)).transpose()?;
        Ok(Page { items, next_cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_pages_cover_everything_once() {
        let items: Vec<u32> = (0..23).collect();
        let key = |i: &u32| i.to_be_bytes().to_vec();
        for limit in [1, 2, 5, 22, 23, 24, 100] {
            let mut seen = Vec::new();
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (page, next) = page_sorted(items.clone(), key, after.as_deref(), limit);
                assert!(page.len() <= limit);
                seen.extend(page);
                match next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
            assert_eq!(seen, items, "limit {limit}");
        }
    }

    #[test]
    fn limits_out_of_range_are_refused() {
        assert!(check_limit(0).is_err());
        assert!(check_limit(PAGE_LIMIT_MAX + 1).is_err());
        assert_eq!(check_limit(1).ok(), Some(1));
        assert_eq!(check_limit(PAGE_LIMIT_MAX).ok(), Some(PAGE_LIMIT_MAX));
    }
}
