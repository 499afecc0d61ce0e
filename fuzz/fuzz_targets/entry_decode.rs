//! Fuzz `Entry::decode`: it must never panic, and whatever it accepts must
//! be canonical (re-encoding gives back the same bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memwarden_log::Entry;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = Entry::decode(data) {
        assert_eq!(
            entry.encode(),
            data,
            "decode accepted a non-canonical encoding"
        );
        assert_eq!(entry.leaf(), memwarden_log::leaf_hash(data));
    }
});
