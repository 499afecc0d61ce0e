//! Fuzz the store's row decoders (`memwarden_store::decode`) with arbitrary stored bytes. The
//! first byte picks the decoder. Properties: no panic; a record that decodes re-encodes to a
//! record that decodes to the same identity; a decoder that checks a row against its key
//! columns accepts exactly the rows whose record names those columns.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memwarden_core::prelude::{Attestation, Elevation, ItemId, MemoryItem, Principal, TenantId};
use memwarden_store::decode;

fn item(text: &str) {
    let tenant = TenantId::new("acme").unwrap_or_else(|_| unreachable!());
    let id = ItemId::from_bytes([7; 16]);
    // Arbitrary bytes against fixed key columns: refused unless they name exactly those.
    let _ = decode::item_record(text, &tenant, &id, "default", &[0; 32], 1);
    let Ok(parsed) = serde_json::from_str::<MemoryItem>(text) else { return };
    let again: MemoryItem = serde_json::from_str(&serde_json::to_string(&parsed).unwrap_or_default()).unwrap_or_else(|e| panic!("a decoded item does not re-decode: {e}"));
    assert_eq!(again.identity_digest(), parsed.identity_digest());
    // Its own key columns and digest: accepted, at the given version.
    let ok = decode::item_record(text, parsed.tenant(), &parsed.id(), parsed.namespace().as_str(), parsed.identity_digest().as_slice(), 9);
    match ok {
        Ok(i) => assert_eq!(i.version(), 9),
        Err(e) => panic!("an item record with its own key columns was refused: {e}"),
    }
}

fn principal(text: &str) {
    let _ = decode::principal_record(text, "acme", "agent");
    if let Ok(p) = serde_json::from_str::<Principal>(text) {
        assert!(decode::principal_record(text, p.tenant.as_str(), p.id.as_str()).is_ok());
    }
}

fn attestation(text: &str) {
    let _ = decode::attestation_record(text, "acme", "payee");
    if let Ok(a) = serde_json::from_str::<Attestation>(text) {
        assert!(decode::attestation_record(text, a.tenant.as_str(), &a.key).is_ok());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let text = std::str::from_utf8(rest).ok();
    match which % 8 {
        0 => text.into_iter().for_each(item),
        1 => text.into_iter().for_each(principal),
        2 => text.into_iter().for_each(attestation),
        3 => {
            let _ = decode::entry_bindings(rest);
        }
        4 => {
            let _ = decode::witness_slot(rest);
        }
        5 => assert_eq!(decode::vector(rest).len(), rest.len() / 4),
        6 => {
            let _ = serde_json::from_slice::<memwarden_store::StoredSession>(rest);
            let _ = serde_json::from_slice::<Elevation>(rest);
        }
        _ => {
            let _ = serde_json::from_slice::<memwarden_log::SignedCheckpoint>(rest);
        }
    }
});
