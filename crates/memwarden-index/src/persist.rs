//! Saving and loading an [`AnnIndex`].
//!
//! File layout (one file, little-endian):
//!
//! ```text
//! magic "MWANNIDX" (8) | header length u32 (4) | header JSON | keys (count x u64)
//! | usearch blob (blob_bytes) | SHA-256 of everything before (32)
//! ```
//!
//! The header holds the format version, the configuration, the count, the caller's
//! watermark (the store's last applied sequence number: replay everything after it) and the
//! section lengths. Loading checks the exact file length, the checksum (before usearch sees a
//! byte of the blob: a damaged blob must never reach the C++ parser), the version, the
//! dimensions and, after loading, that usearch holds exactly the listed keys. Any failure is
//! an error the caller answers by rebuilding from the store.
//!
//! Saving writes a temporary file in the same directory, fsyncs it, renames it over the
//! target and fsyncs the directory, so a crash leaves either the old or the new file.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{IndexConfig, MAX_VECTORS_COUNT};
use crate::index::{AnnIndex, KeyTable};
use crate::IndexError;

/// File format version written and read by this build.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"MWANNIDX";
const MAX_HEADER_BYTES: usize = 64 * 1024;
const CHECKSUM_BYTES: u64 = 32;
const COPY_BUFFER_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format_version: u32,
    config: IndexConfig,
    count: u64,
    free_slots: u64,
    watermark: u64,
    keys_bytes: u64,
    blob_bytes: u64,
    usearch_version: String,
}

/// Removes a temporary file when dropped (unless it was renamed away).
struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

fn temp_path(dir: &Path, name: &str, what: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    dir.join(format!(".{name}.{what}.{}-{n}-{nanos}.tmp", std::process::id()))
}

fn split(path: &Path) -> Result<(PathBuf, String), IndexError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| IndexError::io(format!("index path {}", path.display()), std::io::Error::other("no UTF-8 file name")))?
        .to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

fn utf8(path: &Path) -> Result<&str, IndexError> {
    path.to_str()
        .ok_or_else(|| IndexError::io(format!("path {}", path.display()), std::io::Error::other("path is not UTF-8")))
}

/// Copies exactly `len` bytes, feeding them to `hasher`.
fn copy_hashing(from: &mut impl Read, to: &mut impl Write, len: u64, hasher: &mut Sha256) -> std::io::Result<()> {
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let got = from.read(&mut buf[..want])?;
        if got == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "file ended early"));
        }
        hasher.update(&buf[..got]);
        to.write_all(&buf[..got])?;
        left -= got as u64;
    }
    Ok(())
}

impl AnnIndex {
    /// Saves the index atomically to `path` with the caller's `watermark` (the store's last
    /// applied sequence number). Inserts and removes wait while the graph is written; searches
    /// continue. Returns the file size in bytes.
    pub fn save(&self, path: &Path, watermark: u64) -> Result<u64, IndexError> {
        let (dir, name) = split(path)?;
        let blob = TempFile(Some(temp_path(&dir, &name, "usearch")));
        let (keys, free_slots) = {
            let table = self.table.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let inner = self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.save(utf8(blob.path())?).map_err(IndexError::backend)?;
            (table.keys.clone(), table.free_slots)
        };
        let ctx = |what: &str, p: &Path| format!("{what} {}", p.display());
        let blob_bytes = fs::metadata(blob.path()).map_err(|e| IndexError::io(ctx("reading", blob.path()), e))?.len();
        let header = Header {
            format_version: FORMAT_VERSION,
            config: self.config(),
            count: keys.len() as u64,
            free_slots: free_slots as u64,
            watermark,
            keys_bytes: keys.len() as u64 * 8,
            blob_bytes,
            usearch_version: usearch::version().to_string(),
        };
        let header_json =
            serde_json::to_vec(&header).map_err(|e| IndexError::io("encoding the index header", e.into()))?;
        let header_len = u32::try_from(header_json.len()).unwrap_or(u32::MAX);

        let mut out = TempFile(Some(temp_path(&dir, &name, "index")));
        let write_all = || -> std::io::Result<u64> {
            let file = OpenOptions::new().write(true).create_new(true).open(out.path())?;
            let mut w = BufWriter::with_capacity(COPY_BUFFER_BYTES, file);
            let mut hasher = Sha256::new();
            let mut put = |w: &mut BufWriter<File>, bytes: &[u8]| -> std::io::Result<()> {
                hasher.update(bytes);
                w.write_all(bytes)
            };
            put(&mut w, MAGIC)?;
            put(&mut w, &header_len.to_le_bytes())?;
            put(&mut w, &header_json)?;
            for chunk in keys.chunks(8192) {
                let bytes: Vec<u8> = chunk.iter().flat_map(|k| k.to_le_bytes()).collect();
                put(&mut w, &bytes)?;
            }
            let mut src = BufReader::with_capacity(COPY_BUFFER_BYTES, File::open(blob.path())?);
            copy_hashing(&mut src, &mut w, blob_bytes, &mut hasher)?;
            w.write_all(&hasher.finalize())?;
            let file = w.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            Ok(file.metadata()?.len())
        };
        let size = write_all().map_err(|e| IndexError::io(ctx("writing", out.path()), e))?;
        fs::rename(out.path(), path).map_err(|e| IndexError::io(ctx("renaming the new index to", path), e))?;
        out.keep();
        // Make the rename durable.
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| IndexError::io(ctx("syncing directory", &dir), e))?;
        Ok(size)
    }

    /// Loads an index saved by [`AnnIndex::save`], returning it with the saved watermark.
    /// Refuses (with [`IndexError::Corrupt`], [`IndexError::FormatVersion`] or
    /// [`IndexError::DimsMismatch`]) a truncated, damaged or foreign file or one holding
    /// vectors of other than `expected_dims` dimensions; the caller then rebuilds.
    pub fn load(path: &Path, expected_dims: usize) -> Result<(Self, u64), IndexError> {
        let corrupt = |reason: String| IndexError::Corrupt { path: path.to_path_buf(), reason };
        let io = |e: std::io::Error| IndexError::io(format!("reading {}", path.display()), e);
        let file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut r = BufReader::with_capacity(COPY_BUFFER_BYTES, file);
        let mut hasher = Sha256::new();

        let mut fixed = [0u8; 12];
        if file_len < fixed.len() as u64 + CHECKSUM_BYTES {
            return Err(corrupt(format!("truncated: {file_len} bytes")));
        }
        r.read_exact(&mut fixed).map_err(io)?;
        hasher.update(fixed);
        if &fixed[..8] != MAGIC {
            return Err(corrupt("not a memwarden index file (bad magic)".into()));
        }
        let header_len = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]) as usize;
        if header_len > MAX_HEADER_BYTES || (12 + header_len) as u64 + CHECKSUM_BYTES > file_len {
            return Err(corrupt(format!("header length {header_len} is impossible for a {file_len}-byte file")));
        }
        let mut header_json = vec![0u8; header_len];
        r.read_exact(&mut header_json).map_err(io)?;
        hasher.update(&header_json);
        // The version is checked before the rest of the header, so a future layout is
        // reported as a version mismatch rather than as damage.
        let version = serde_json::from_slice::<serde_json::Value>(&header_json)
            .ok()
            .and_then(|v| v.get("format_version").and_then(serde_json::Value::as_u64));
        match version {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(IndexError::FormatVersion {
                    path: path.to_path_buf(),
                    found: u32::try_from(v).unwrap_or(u32::MAX),
                    expected: FORMAT_VERSION,
                });
            }
            None => return Err(corrupt("unreadable header".into())),
        }
        let header: Header =
            serde_json::from_slice(&header_json).map_err(|e| corrupt(format!("unreadable header: {e}")))?;
        header.config.validate().map_err(|e| corrupt(format!("header config: {e}")))?;
        if header.config.dims != expected_dims {
            return Err(IndexError::DimsMismatch {
                path: path.to_path_buf(),
                found: header.config.dims,
                expected: expected_dims,
            });
        }
        let count = usize::try_from(header.count).unwrap_or(usize::MAX);
        if count > MAX_VECTORS_COUNT || header.keys_bytes != header.count.saturating_mul(8) {
            return Err(corrupt(format!("impossible key count {}", header.count)));
        }
        let expected_len = (12 + header_len as u64)
            .saturating_add(header.keys_bytes)
            .saturating_add(header.blob_bytes)
            .saturating_add(CHECKSUM_BYTES);
        if expected_len != file_len {
            return Err(corrupt(format!("file has {file_len} bytes, its header describes {expected_len} (truncated?)")));
        }

        let mut keys = Vec::with_capacity(count);
        let mut word = [0u8; 8];
        for _ in 0..count {
            r.read_exact(&mut word).map_err(io)?;
            hasher.update(word);
            keys.push(u64::from_le_bytes(word));
        }
        let (dir, name) = split(path)?;
        let blob = TempFile(Some(temp_path(&dir, &name, "load")));
        {
            let mut w = BufWriter::with_capacity(
                COPY_BUFFER_BYTES,
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(blob.path())
                    .map_err(|e| IndexError::io(format!("creating {}", blob.path().display()), e))?,
            );
            copy_hashing(&mut r, &mut w, header.blob_bytes, &mut hasher).map_err(io)?;
            w.flush().map_err(|e| IndexError::io(format!("writing {}", blob.path().display()), e))?;
        }
        let mut stored = [0u8; 32];
        r.read_exact(&mut stored).map_err(io)?;
        if hasher.finalize().as_slice() != stored {
            return Err(corrupt("checksum mismatch".into()));
        }

        let free_slots = usize::try_from(header.free_slots).unwrap_or(usize::MAX);
        let table =
            KeyTable::from_keys(keys, free_slots).ok_or_else(|| corrupt("duplicate or reserved key".into()))?;
        let cfg = header.config;
        let inner = Self::native(&cfg)?;
        inner.load(utf8(blob.path())?).map_err(|e| corrupt(format!("usearch refused the graph: {e}")))?;
        if inner.dimensions() != cfg.dims || inner.size() != count {
            return Err(corrupt(format!(
                "graph holds {} vectors of {} dimensions; header says {count} of {}",
                inner.size(),
                inner.dimensions(),
                cfg.dims
            )));
        }
        if let Some(missing) = table.keys.iter().find(|&&k| !inner.contains(k)) {
            return Err(corrupt(format!("key {missing} is listed but not in the graph")));
        }
        // Loading resets usearch's scratch contexts and search expansion; restore ours.
        inner.change_expansion_search(1);
        let capacity = (count + free_slots + 1).max(inner.capacity());
        inner.reserve_capacity_and_threads(capacity, cfg.max_concurrent_ops).map_err(IndexError::backend)?;
        Ok((Self::wrap(cfg, inner, table), header.watermark))
    }
}
