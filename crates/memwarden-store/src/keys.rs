//! The store's key directory: the checkpoint-signing key, the store it belongs to, and the
//! **witness** — the latest signed tree head, rewritten after every group commit. By default it
//! is `<data dir>/keys`, so the data directory is the whole state; [`KeyLocation::Dir`] and
//! [`KeyLocation::StateDir`] keep it elsewhere (see the threat model in the crate docs).

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use memwarden_log::SignedCheckpoint;
use sha2::{Digest, Sha256};

use crate::StoreError;

/// The signing key's file in a key directory.
pub(crate) const LOG_KEY_FILE: &str = "log.ed25519";
/// Which store a key directory belongs to.
pub(crate) const STORE_FILE: &str = "store.json";
/// The witness: the latest signed checkpoint of each tenant's log.
pub(crate) const WITNESS_DIR: &str = "witness";
/// Longest directory-name prefix taken from the data directory's name.
const NAME_BYTES_MAX: usize = 32;
/// The key directory inside a data directory ([`KeyLocation::InDataDir`]).
pub(crate) const IN_DATA_DIR: &str = "keys";

/// Where a store keeps its checkpoint-signing key and its witness (the latest signed tree
/// head, against which opening and `verify_log` detect a rolled-back or replaced database).
///
/// The trade-off: with the key directory inside the data directory (the default), a copy or
/// backup of the data directory is complete and opens anywhere, but whoever can write the data
/// directory can also re-sign its log and rewrite its witness, so a rollback (or a replaced
/// directory) by such a writer is no longer detected; edits of rows and log entries by someone
/// who cannot read the key still are. To detect rollbacks by someone who can write the data
/// directory, keep the key directory out of that writer's reach with [`KeyLocation::Dir`] or
/// [`KeyLocation::StateDir`] (and back it up with the data directory).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KeyLocation {
    /// `<data dir>/keys` (0700, files 0600): the data directory is the whole state, so
    /// `cp -a` of a stopped store's directory is a complete backup that opens at any path.
    /// Whoever can write the data directory can re-sign its log and witness, so neither detects
    /// a rollback by such a writer (use [`KeyLocation::Dir`] or [`KeyLocation::StateDir`] for
    /// that). A store whose key is still in the [`KeyLocation::StateDir`] location of an
    /// earlier version's default has it copied here (key, `store.json`, witness) at open.
    #[default]
    InDataDir,
    /// This directory (created 0700 when missing). One key directory serves one store.
    Dir(PathBuf),
    /// A directory of its own per data directory (by canonical path), outside it (the default
    /// of earlier versions): `$XDG_STATE_HOME/memwarden/keys/<name>-<hash>`, else
    /// `$HOME/.local/state/memwarden/keys/<name>-<hash>`. Opening fails with a clear error when
    /// neither variable is set (configure [`KeyLocation::Dir`]). Detects a rollback by whoever
    /// can write only the data directory; a copy of the data directory opened at another path
    /// has no key there.
    StateDir,
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |error| StoreError::Io { path: path.display().to_string(), error }
}

/// Create `dir` (and parents) and make it 0700.
pub(crate) fn private_dir(dir: &Path) -> Result<(), StoreError> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(io_err(dir))?;
    set_mode(dir, 0o700)
}

/// Set a file's or directory's permission bits (Unix; a no-op elsewhere).
pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_err(path))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Write a file readable only by its owner (0600), fsync it, and move it into place
/// atomically.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    set_mode(&tmp, 0o600)?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// The key directory of the store in `data_dir`.
pub(crate) fn resolve(data_dir: &Path, loc: &KeyLocation) -> Result<PathBuf, StoreError> {
    match loc {
        KeyLocation::Dir(d) => Ok(d.clone()),
        KeyLocation::InDataDir => Ok(data_dir.join(IN_DATA_DIR)),
        KeyLocation::StateDir => {
            let base = std::env::var_os("XDG_STATE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local").join("state")))
                .ok_or_else(|| StoreError::KeyDir("neither XDG_STATE_HOME nor HOME is set: configure StoreConfig::keys".into()))?;
            let canonical = std::fs::canonicalize(data_dir).map_err(io_err(data_dir))?;
            Ok(base.join("memwarden").join("keys").join(default_name(&canonical)))
        }
    }
}

/// `<name>-<16 hex digits of SHA-256 of the canonical path>`.
fn default_name(canonical: &Path) -> String {
    let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect())
        .unwrap_or_default();
    let mut name = name.trim_start_matches('.').to_owned();
    name.truncate(NAME_BYTES_MAX);
    if name.is_empty() {
        name.push_str("store");
    }
    format!("{name}-{}", hex::encode(&digest[..8]))
}

fn parse_key(path: &Path, text: &str) -> Result<SigningKey, StoreError> {
    let mut seed = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut seed).map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The key in `dir`, if there is one.
pub fn load_key(dir: &Path) -> Result<Option<SigningKey>, StoreError> {
    let path = dir.join(LOG_KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_key(&path, &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// A fresh key, written to `dir` (0600).
pub fn create_key(dir: &Path) -> Result<SigningKey, StoreError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| StoreError::Corrupt(format!("no randomness for the log key: {e}")))?;
    write_private(&dir.join(LOG_KEY_FILE), hex::encode(seed).as_bytes())?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Store `key` in `dir` (moving a key out of an old-layout data directory).
pub(crate) fn save_key(dir: &Path, key: &SigningKey) -> Result<(), StoreError> {
    write_private(&dir.join(LOG_KEY_FILE), hex::encode(key.to_bytes()).as_bytes())
}

/// What a key directory's `store.json` records.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct StoreFile {
    /// The store the key directory belongs to.
    pub(crate) store_id: String,
    /// The data directory it was last opened at (informational).
    pub(crate) data_dir: String,
}

/// The key directory's `store.json`, if it was bound to a store.
pub(crate) fn store_file(dir: &Path) -> Result<Option<StoreFile>, StoreError> {
    let path = dir.join(STORE_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// The id of the store the key directory belongs to, if it was bound to one.
pub(crate) fn bound_store(dir: &Path) -> Result<Option<String>, StoreError> {
    Ok(store_file(dir)?.map(|f| f.store_id))
}

/// Bind the key directory to `store_id`.
pub(crate) fn bind_store(dir: &Path, store_id: &str, data_dir: &Path) -> Result<(), StoreError> {
    let f = StoreFile { store_id: store_id.to_owned(), data_dir: data_dir.display().to_string() };
    let bytes = serde_json::to_vec_pretty(&f).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    write_private(&dir.join(STORE_FILE), &bytes)
}

/// Whether `dir` holds a log key and is bound to `store_id`.
fn holds_key_of(dir: &Path, store_id: &str) -> bool {
    dir.is_dir() && bound_store(dir).ok().flatten().as_deref() == Some(store_id) && load_key(dir).ok().flatten().is_some()
}

/// A sibling of the default key directory `default_dir` that holds a key and is bound to
/// `store_id` (how a copy of a data directory finds the key directory of the store it was
/// copied from, for verification).
pub(crate) fn find_by_store(default_dir: &Path, store_id: &str) -> Result<Option<PathBuf>, StoreError> {
    let Some(parent) = default_dir.parent() else { return Ok(None) };
    let Ok(entries) = std::fs::read_dir(parent) else { return Ok(None) };
    for e in entries.flatten() {
        let dir = e.path();
        if holds_key_of(&dir, store_id) {
            return Ok(Some(dir));
        }
    }
    Ok(None)
}

/// The key directory that the default of earlier versions ([`KeyLocation::StateDir`]) kept for
/// the store `store_id` in `data_dir`: the one of this path if it holds a key bound to that
/// store, else (a copy of the data directory made at another path) a sibling that does. `None`
/// when there is none, or when neither `XDG_STATE_HOME` nor `HOME` is set.
pub(crate) fn state_dir_of(data_dir: &Path, store_id: &str) -> Option<PathBuf> {
    let dir = resolve(data_dir, &KeyLocation::StateDir).ok()?;
    if holds_key_of(&dir, store_id) {
        return Some(dir);
    }
    find_by_store(&dir, store_id).ok().flatten()
}

/// Copy the key directory `from` into `to` (0700; files 0600), leaving `from` as it is: the
/// witness files, then `store.json`, then the key last, so a copy cut short by a crash leaves
/// `to` without a key and is simply made again at the next open.
pub(crate) fn copy_key_dir(from: &Path, to: &Path) -> Result<(), StoreError> {
    private_dir(to)?;
    let wfrom = from.join(WITNESS_DIR);
    match std::fs::read_dir(&wfrom) {
        Ok(entries) => {
            let wto = to.join(WITNESS_DIR);
            private_dir(&wto)?;
            for e in entries {
                let e = e.map_err(io_err(&wfrom))?;
                if !e.file_type().map_err(io_err(&wfrom))?.is_file() {
                    continue;
                }
                let bytes = std::fs::read(e.path()).map_err(io_err(&e.path()))?;
                write_private(&wto.join(e.file_name()), &bytes)?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&wfrom)(e)),
    }
    for name in [STORE_FILE, LOG_KEY_FILE] {
        let path = from.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => write_private(&to.join(name), &bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
    }
    Ok(())
}

/// One tenant's witnessed head.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Witness {
    pub(crate) store_id: String,
    pub(crate) tenant: String,
    pub(crate) checkpoint: SignedCheckpoint,
}

/// A witness file holds two slots, written alternately in place (by the parity of the
/// checkpoint size) and `fdatasync`ed: no file is created or renamed per commit, and a write
/// torn by a crash leaves the other slot, an older but valid head.
const SLOT_BYTES: usize = 4096;
const SLOT_MAGIC: &[u8; 8] = b"MWWIT\x01\0\0";
const WITNESS_EXT: &str = "wit";
/// The JSON witness of schema 5 (one global log).
const LEGACY_WITNESS_EXT: &str = "json";

fn witness_file(dir: &Path, tenant: &str, ext: &str) -> PathBuf {
    let digest = Sha256::digest(tenant.as_bytes());
    dir.join(WITNESS_DIR).join(format!("{}.{ext}", hex::encode(&digest[..16])))
}

fn slot_checksum(seq: u64, json: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(SLOT_MAGIC);
    h.update(seq.to_be_bytes());
    h.update((json.len() as u32).to_be_bytes());
    h.update(json);
    h.finalize().into()
}

/// Write a tenant's witness (in place, fsynced).
pub(crate) fn write_witness(dir: &Path, w: &Witness) -> Result<(), StoreError> {
    use std::io::{Seek, SeekFrom, Write};
    let json = serde_json::to_vec(w).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let seq = w.checkpoint.checkpoint.size;
    let mut slot = Vec::with_capacity(SLOT_BYTES);
    slot.extend_from_slice(SLOT_MAGIC);
    slot.extend_from_slice(&seq.to_be_bytes());
    slot.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    slot.extend_from_slice(&json);
    slot.extend_from_slice(&slot_checksum(seq, &json));
    if slot.len() > SLOT_BYTES {
        return Err(StoreError::Corrupt(format!("a witness of {} bytes does not fit its slot", slot.len())));
    }
    slot.resize(SLOT_BYTES, 0);
    let file = witness_file(dir, &w.tenant, WITNESS_EXT);
    if let Some(parent) = file.parent()
        && !parent.is_dir()
    {
        private_dir(parent)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&file).map_err(io_err(&file))?;
    let fresh = f.metadata().map_err(io_err(&file))?.len() < (2 * SLOT_BYTES) as u64;
    if fresh {
        f.set_len((2 * SLOT_BYTES) as u64).map_err(io_err(&file))?;
    }
    f.seek(SeekFrom::Start((seq % 2) * SLOT_BYTES as u64)).map_err(io_err(&file))?;
    f.write_all(&slot).map_err(io_err(&file))?;
    if fresh { f.sync_all() } else { f.sync_data() }.map_err(io_err(&file))
}

pub(crate) fn parse_slot(b: &[u8]) -> Option<(u64, Witness)> {
    let magic = b.get(..8)?;
    if magic != SLOT_MAGIC {
        return None;
    }
    let seq = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
    let len = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?) as usize;
    let json = b.get(20..20 + len)?;
    let sum = b.get(20 + len..20 + len + 32)?;
    if sum != slot_checksum(seq, json) {
        return None;
    }
    let w: Witness = serde_json::from_slice(json).ok()?;
    (w.checkpoint.checkpoint.size == seq).then_some((seq, w))
}

/// Every tenant's witness in the key directory (the newer valid slot of each file).
pub(crate) fn read_witnesses(dir: &Path) -> Result<Vec<Witness>, StoreError> {
    let wdir = dir.join(WITNESS_DIR);
    let entries = match std::fs::read_dir(&wdir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&wdir)(e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let path = e.map_err(io_err(&wdir))?.path();
        if path.extension().is_none_or(|x| x != WITNESS_EXT) {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        let best = bytes.chunks(SLOT_BYTES).filter_map(parse_slot).max_by_key(|(seq, _)| *seq);
        let Some((_, w)) = best else {
            return Err(StoreError::Corrupt(format!("witness {} holds no valid head", path.display())));
        };
        if witness_file(dir, &w.tenant, WITNESS_EXT) != path {
            return Err(StoreError::Corrupt(format!("witness {} names another tenant", path.display())));
        }
        out.push(w);
    }
    out.sort_by(|a, b| a.tenant.cmp(&b.tenant));
    Ok(out)
}

/// The JSON witness a schema-5 store kept for its one global log, if any.
pub(crate) fn read_legacy_witness(dir: &Path) -> Result<Option<Witness>, StoreError> {
    let path = witness_file(dir, "", LEGACY_WITNESS_EXT);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| StoreError::Corrupt(format!("witness {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Remove the schema-5 witness (after its log was migrated and verified against it).
pub(crate) fn remove_legacy_witness(dir: &Path) {
    let _ = std::fs::remove_file(witness_file(dir, "", LEGACY_WITNESS_EXT));
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2.
    #[test]
    fn hmac_matches_rfc_4231() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex::encode(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn default_names_are_per_path_and_tame() {
        let a = default_name(Path::new("/var/lib/memwarden"));
        let b = default_name(Path::new("/srv/memwarden"));
        assert!(a.starts_with("memwarden-") && b.starts_with("memwarden-"));
        assert_ne!(a, b);
        assert!(default_name(Path::new("/tmp/.tmpAbC")).starts_with("tmpAbC-"));
        assert!(default_name(Path::new("/")).starts_with("store-"));
        assert!(!default_name(Path::new("/x/a b/../c")).contains(' '));
    }
}
