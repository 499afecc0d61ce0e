//! Scope arithmetic: effective readers, intersection at write, the subset order.

use memwarden_core::ids::PrincipalId;
use memwarden_core::item::{Readers, Scope, Visibility};
use std::collections::BTreeSet;

/// `a ⊆ b` for reader sets (`All` is the top).
pub fn readers_subset(a: &Readers, b: &Readers) -> bool {
    match (a, b) {
        (_, Readers::All) => true,
        (Readers::All, Readers::Only(_)) => false,
        (Readers::Only(x), Readers::Only(y)) => x.is_subset(y),
    }
}

/// Who may read under `scope` alone: nobody when revoked; everyone when the readers are `All`;
/// otherwise the named readers plus the owner.
pub fn effective_readers(scope: &Scope) -> Readers {
    match (scope.visibility, &scope.readers) {
        (Visibility::Revoked, _) => Readers::Only(BTreeSet::new()),
        (_, Readers::All) => Readers::All,
        (_, Readers::Only(set)) => {
            let mut s = set.clone();
            s.insert(scope.owner.clone());
            Readers::Only(s)
        }
    }
}

/// The visibility that goes with a reader set: `Shared` exactly when it covers every principal of
/// the namespace, which only `All` does (a named set that happens to list every current agent
/// stays `Private`: an agent that joins later is not in it).
pub fn visibility_of(readers: &Readers) -> Visibility {
    match readers {
        Readers::All => Visibility::Shared,
        Readers::Only(_) => Visibility::Private,
    }
}

/// A scope built from a reader set, with the visibility derived from it.
pub fn scope_of(owner: PrincipalId, readers: Readers) -> Scope {
    let visibility = visibility_of(&readers);
    Scope { owner, readers, visibility }
}

/// The scope of a revoked item: visibility revoked, permission set cleared.
pub fn revoked_scope(owner: PrincipalId) -> Scope {
    Scope { owner, readers: Readers::Only(BTreeSet::new()), visibility: Visibility::Revoked }
}

/// The result of [`derive_scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedScope {
    /// The scope.
    pub scope: Scope,
    /// The intersection was empty and the scope fell back to the writer alone.
    pub fell_back: bool,
}

/// Write-time scope derivation (the paper's rule): the intersection of the referenced scopes
/// (each parent's effective readers, plus an optional explicit narrowing); no referenced scope →
/// all agents of the namespace (`All`); an empty intersection → the writer alone. The owner is the
/// writer; the visibility is shared only when the result is `All`.
pub fn derive_scope<'a>(
    writer: &PrincipalId,
    parents: impl IntoIterator<Item = &'a Scope>,
    narrowing: Option<&BTreeSet<PrincipalId>>,
) -> DerivedScope {
    let mut acc = Readers::All;
    let mut parent_eff = Vec::new();
    for p in parents {
        let eff = effective_readers(p);
        acc = acc.intersect(&eff);
        parent_eff.push(eff);
    }
    if let Some(n) = narrowing {
        acc = acc.intersect(&Readers::Only(n.clone()));
    }
    let fell_back = matches!(&acc, Readers::Only(s) if s.is_empty());
    let readers = if fell_back { Readers::Only(BTreeSet::from([writer.clone()])) } else { acc };
    if !fell_back {
        debug_assert!(
            parent_eff.iter().all(|e| readers_subset(&readers, e)),
            "a derived scope is a subset of every parent's scope"
        );
    }
    DerivedScope { scope: scope_of(writer.clone(), readers), fell_back }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PrincipalId {
        PrincipalId::new(s).unwrap()
    }

    #[test]
    fn subset_order() {
        let ab = Readers::Only([p("a"), p("b")].into());
        let a = Readers::Only([p("a")].into());
        assert!(readers_subset(&a, &ab));
        assert!(!readers_subset(&ab, &a));
        assert!(readers_subset(&ab, &Readers::All));
        assert!(!readers_subset(&Readers::All, &ab));
        assert!(readers_subset(&Readers::All, &Readers::All));
    }

    #[test]
    fn effective_readers_include_the_owner_and_exclude_everyone_when_revoked() {
        let s = scope_of(p("o"), Readers::Only([p("a")].into()));
        assert_eq!(effective_readers(&s), Readers::Only([p("a"), p("o")].into()));
        assert_eq!(effective_readers(&revoked_scope(p("o"))), Readers::Only(BTreeSet::new()));
        assert_eq!(effective_readers(&scope_of(p("o"), Readers::All)), Readers::All);
    }
}
