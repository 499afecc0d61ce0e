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

use crate::classed::{Block, Class, ClassId, ClassedIndex, PARKED_CLASS, State};
use crate::config::{IndexConfig, MAX_CLASSES_COUNT, MAX_VECTORS_COUNT};
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
        let (keys, free_slots) = self.save_blob(blob.path())?;
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
        check_version(path, &header_json, FORMAT_VERSION)?;
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
        let index = Self::from_blob(header.config, blob.path(), keys, free_slots, &corrupt)?;
        Ok((index, header.watermark))
    }

    /// Writes usearch's graph to `blob`; returns the keys it holds and its free slots.
    /// Inserts and removes wait meanwhile; searches continue.
    pub(crate) fn save_blob(&self, blob: &Path) -> Result<(Vec<u64>, usize), IndexError> {
        let table = self.table.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.save(utf8(blob)?).map_err(IndexError::backend)?;
        Ok((table.keys.clone(), table.free_slots))
    }

    /// An index from a usearch blob whose checksum the caller has verified, holding exactly
    /// `keys`.
    pub(crate) fn from_blob(
        cfg: IndexConfig,
        blob: &Path,
        keys: Vec<u64>,
        free_slots: usize,
        corrupt: &dyn Fn(String) -> IndexError,
    ) -> Result<Self, IndexError> {
        let count = keys.len();
        let table = KeyTable::from_keys(keys, free_slots).ok_or_else(|| corrupt("duplicate or reserved key".into()))?;
        let inner = Self::native(&cfg)?;
        inner.load(utf8(blob)?).map_err(|e| corrupt(format!("usearch refused the graph: {e}")))?;
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
        Ok(Self::wrap(cfg, inner, table))
    }
}

/// File format version of [`ClassedIndex`] files written and read by this build.
pub const CLASSED_FORMAT_VERSION: u32 = 1;
const CLASSED_MAGIC: &[u8; 8] = b"MWCLSIDX";
/// One class-table entry: class, block count, has-graph flag, graph count, graph free slots,
/// graph blob bytes (six little-endian u64).
const CLASS_ENTRY_BYTES: usize = 48;
/// Bytes converted per write while streaming block rows.
const ROW_CHUNK_FLOATS: usize = 16 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassedHeader {
    format_version: u32,
    config: IndexConfig,
    graph_min_count: u64,
    watermark: u64,
    classes_count: u64,
    usearch_version: String,
}

#[derive(Debug, Clone, Copy)]
struct ClassEntry {
    class: u64,
    block_count: u64,
    has_graph: bool,
    graph_count: u64,
    free_slots: u64,
    blob_bytes: u64,
}

impl ClassEntry {
    fn encode(&self) -> [u8; CLASS_ENTRY_BYTES] {
        let mut out = [0u8; CLASS_ENTRY_BYTES];
        let words = [self.class, self.block_count, u64::from(self.has_graph), self.graph_count, self.free_slots, self.blob_bytes];
        for (slot, w) in out.chunks_exact_mut(8).zip(words) {
            slot.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8; CLASS_ENTRY_BYTES]) -> Option<Self> {
        let mut w = [0u64; 6];
        for (slot, chunk) in w.iter_mut().zip(bytes.chunks_exact(8)) {
            *slot = u64::from_le_bytes(chunk.try_into().ok()?);
        }
        let has_graph = match w[2] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let e = Self { class: w[0], block_count: w[1], has_graph, graph_count: w[3], free_slots: w[4], blob_bytes: w[5] };
        if !has_graph && (e.graph_count != 0 || e.free_slots != 0 || e.blob_bytes != 0) {
            return None;
        }
        Some(e)
    }

    /// Bytes of this class's sections (block keys and rows, graph keys and blob).
    fn section_bytes(&self, dims: u64) -> Option<u64> {
        let block = self.block_count.checked_mul(8)?.checked_add(self.block_count.checked_mul(dims)?.checked_mul(4)?)?;
        block.checked_add(self.graph_count.checked_mul(8)?)?.checked_add(self.blob_bytes)
    }
}

/// Reads the format version from a header before the rest of it, so a future layout is
/// reported as a version mismatch rather than as damage.
fn check_version(path: &Path, header_json: &[u8], expected: u32) -> Result<(), IndexError> {
    let version = serde_json::from_slice::<serde_json::Value>(header_json)
        .ok()
        .and_then(|v| v.get("format_version").and_then(serde_json::Value::as_u64));
    match version {
        Some(v) if v == u64::from(expected) => Ok(()),
        Some(v) => Err(IndexError::FormatVersion { path: path.to_path_buf(), found: u32::try_from(v).unwrap_or(u32::MAX), expected }),
        None => Err(IndexError::Corrupt { path: path.to_path_buf(), reason: "unreadable header".into() }),
    }
}

impl ClassedIndex {
    /// Saves the index atomically to `path` with the caller's `watermark` (the store's last
    /// applied sequence number). One file holds every class: its block rows and its graph.
    /// Adds, moves and removes wait while it is written; searches continue. Returns the file
    /// size in bytes.
    ///
    /// Layout (little-endian): magic `MWCLSIDX` | header length u32 | header JSON | class
    /// table (48 bytes per class, by class id) | per class: block keys (u64), block rows (f32,
    /// normalised), graph keys (u64), usearch blob | SHA-256 of everything before.
    pub fn save(&self, path: &Path, watermark: u64) -> Result<u64, IndexError> {
        let (dir, name) = split(path)?;
        let st = self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut ids: Vec<ClassId> = st.classes.keys().copied().collect();
        ids.sort_unstable();
        let ctx = |what: &str, p: &Path| format!("{what} {}", p.display());
        let mut entries = Vec::with_capacity(ids.len());
        let mut parts = Vec::with_capacity(ids.len());
        for id in &ids {
            let c = st.classes.get(id).ok_or_else(|| IndexError::Backend(format!("class {id} vanished while saving")))?;
            let graph = match &c.graph {
                Some(g) => {
                    let blob = TempFile(Some(temp_path(&dir, &name, "usearch")));
                    let (keys, free_slots) = g.save_blob(blob.path())?;
                    let bytes = fs::metadata(blob.path()).map_err(|e| IndexError::io(ctx("reading", blob.path()), e))?.len();
                    Some((blob, keys, free_slots, bytes))
                }
                None => None,
            };
            entries.push(ClassEntry {
                class: *id,
                block_count: c.block.len() as u64,
                has_graph: graph.is_some(),
                graph_count: graph.as_ref().map_or(0, |g| g.1.len() as u64),
                free_slots: graph.as_ref().map_or(0, |g| g.2 as u64),
                blob_bytes: graph.as_ref().map_or(0, |g| g.3),
            });
            parts.push((c, graph));
        }
        let header = ClassedHeader {
            format_version: CLASSED_FORMAT_VERSION,
            config: self.config(),
            graph_min_count: self.graph_min_count() as u64,
            watermark,
            classes_count: ids.len() as u64,
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
            let put = |w: &mut BufWriter<File>, hasher: &mut Sha256, bytes: &[u8]| -> std::io::Result<()> {
                hasher.update(bytes);
                w.write_all(bytes)
            };
            put(&mut w, &mut hasher, CLASSED_MAGIC)?;
            put(&mut w, &mut hasher, &header_len.to_le_bytes())?;
            put(&mut w, &mut hasher, &header_json)?;
            for e in &entries {
                put(&mut w, &mut hasher, &e.encode())?;
            }
            for (c, graph) in &parts {
                for chunk in c.block.keys.chunks(8192) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|k| k.to_le_bytes()).collect();
                    put(&mut w, &mut hasher, &bytes)?;
                }
                for chunk in c.block.rows.chunks(ROW_CHUNK_FLOATS) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|x| x.to_le_bytes()).collect();
                    put(&mut w, &mut hasher, &bytes)?;
                }
                if let Some((blob, keys, _, blob_bytes)) = graph {
                    for chunk in keys.chunks(8192) {
                        let bytes: Vec<u8> = chunk.iter().flat_map(|k| k.to_le_bytes()).collect();
                        put(&mut w, &mut hasher, &bytes)?;
                    }
                    let mut src = BufReader::with_capacity(COPY_BUFFER_BYTES, File::open(blob.path())?);
                    copy_hashing(&mut src, &mut w, *blob_bytes, &mut hasher)?;
                }
            }
            w.write_all(&hasher.finalize())?;
            let file = w.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            Ok(file.metadata()?.len())
        };
        let size = write_all().map_err(|e| IndexError::io(ctx("writing", out.path()), e))?;
        drop(parts);
        drop(st);
        fs::rename(out.path(), path).map_err(|e| IndexError::io(ctx("renaming the new index to", path), e))?;
        out.keep();
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| IndexError::io(ctx("syncing directory", &dir), e))?;
        Ok(size)
    }

    /// Loads an index saved by [`ClassedIndex::save`], returning it with the saved watermark;
    /// `graph_min_count` is the caller's policy from now on (a class that has reached it
    /// without a graph gets one at [`ClassedIndex::finish_migrations`] or its next change).
    /// Refuses (with [`IndexError::Corrupt`], [`IndexError::FormatVersion`] or
    /// [`IndexError::DimsMismatch`]) a truncated, damaged or foreign file or one holding
    /// vectors of other than `expected_dims` dimensions; the caller then rebuilds. The length
    /// and the checksum are checked before usearch parses any graph.
    pub fn load(path: &Path, expected_dims: usize, graph_min_count: usize) -> Result<(Self, u64), IndexError> {
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
        if &fixed[..8] != CLASSED_MAGIC {
            return Err(corrupt("not a memwarden classed index file (bad magic)".into()));
        }
        let header_len = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]) as usize;
        if header_len > MAX_HEADER_BYTES || (12 + header_len) as u64 + CHECKSUM_BYTES > file_len {
            return Err(corrupt(format!("header length {header_len} is impossible for a {file_len}-byte file")));
        }
        let mut header_json = vec![0u8; header_len];
        r.read_exact(&mut header_json).map_err(io)?;
        hasher.update(&header_json);
        check_version(path, &header_json, CLASSED_FORMAT_VERSION)?;
        let header: ClassedHeader =
            serde_json::from_slice(&header_json).map_err(|e| corrupt(format!("unreadable header: {e}")))?;
        header.config.validate().map_err(|e| corrupt(format!("header config: {e}")))?;
        let cfg = header.config;
        if cfg.dims != expected_dims {
            return Err(IndexError::DimsMismatch { path: path.to_path_buf(), found: cfg.dims, expected: expected_dims });
        }
        let classes_count = usize::try_from(header.classes_count).unwrap_or(usize::MAX);
        if classes_count > MAX_CLASSES_COUNT {
            return Err(corrupt(format!("impossible class count {}", header.classes_count)));
        }
        let table_bytes = (classes_count * CLASS_ENTRY_BYTES) as u64;
        if (12 + header_len as u64).saturating_add(table_bytes).saturating_add(CHECKSUM_BYTES) > file_len {
            return Err(corrupt(format!("{classes_count} classes do not fit in a {file_len}-byte file")));
        }
        let mut entries = Vec::with_capacity(classes_count);
        let mut raw = [0u8; CLASS_ENTRY_BYTES];
        for _ in 0..classes_count {
            r.read_exact(&mut raw).map_err(io)?;
            hasher.update(raw);
            entries.push(ClassEntry::decode(&raw).ok_or_else(|| corrupt("bad class table entry".into()))?);
        }
        let dims = cfg.dims as u64;
        let mut expected_len = (12 + header_len as u64).saturating_add(table_bytes).saturating_add(CHECKSUM_BYTES);
        let mut total_keys = 0u64;
        for (i, e) in entries.iter().enumerate() {
            if i > 0 && entries[i - 1].class >= e.class {
                return Err(corrupt("class table is not in strictly increasing class order".into()));
            }
            if e.class == PARKED_CLASS && e.has_graph {
                return Err(corrupt("the parked class has a graph".into()));
            }
            total_keys = total_keys.saturating_add(e.block_count).saturating_add(e.graph_count);
            if total_keys > MAX_VECTORS_COUNT as u64 {
                return Err(corrupt(format!("more than {MAX_VECTORS_COUNT} keys")));
            }
            let bytes = e.section_bytes(dims).ok_or_else(|| corrupt(format!("class {} has impossible sizes", e.class)))?;
            expected_len = expected_len.saturating_add(bytes);
        }
        if expected_len != file_len {
            return Err(corrupt(format!("file has {file_len} bytes, its header describes {expected_len} (truncated?)")));
        }

        // Every section, hashed, before anything is parsed.
        let (dir, name) = split(path)?;
        let read_u64s = |r: &mut BufReader<File>, hasher: &mut Sha256, count: u64| -> Result<Vec<u64>, IndexError> {
            let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
            let mut word = [0u8; 8];
            for _ in 0..count {
                r.read_exact(&mut word).map_err(io)?;
                hasher.update(word);
                out.push(u64::from_le_bytes(word));
            }
            Ok(out)
        };
        let mut sections = Vec::with_capacity(entries.len());
        for e in &entries {
            let block_keys = read_u64s(&mut r, &mut hasher, e.block_count)?;
            let floats = usize::try_from(e.block_count.saturating_mul(dims)).unwrap_or(usize::MAX);
            let mut rows = Vec::with_capacity(floats);
            let mut buf = vec![0u8; ROW_CHUNK_FLOATS * 4];
            let mut left = floats;
            while left > 0 {
                let n = left.min(ROW_CHUNK_FLOATS);
                r.read_exact(&mut buf[..n * 4]).map_err(io)?;
                hasher.update(&buf[..n * 4]);
                rows.extend(buf[..n * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                left -= n;
            }
            let graph = if e.has_graph {
                let keys = read_u64s(&mut r, &mut hasher, e.graph_count)?;
                let blob = TempFile(Some(temp_path(&dir, &name, "load")));
                let mut w = BufWriter::with_capacity(
                    COPY_BUFFER_BYTES,
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(blob.path())
                        .map_err(|err| IndexError::io(format!("creating {}", blob.path().display()), err))?,
                );
                copy_hashing(&mut r, &mut w, e.blob_bytes, &mut hasher).map_err(io)?;
                w.flush().map_err(|err| IndexError::io(format!("writing {}", blob.path().display()), err))?;
                Some((keys, blob))
            } else {
                None
            };
            sections.push((block_keys, rows, graph));
        }
        let mut stored = [0u8; 32];
        r.read_exact(&mut stored).map_err(io)?;
        if hasher.finalize().as_slice() != stored {
            return Err(corrupt("checksum mismatch".into()));
        }

        let mut state = State::default();
        for (e, (block_keys, rows, graph)) in entries.iter().zip(sections) {
            if rows.iter().any(|x| !x.is_finite()) {
                return Err(corrupt(format!("class {} has a non-finite vector component", e.class)));
            }
            let block = Block::from_parts(cfg.dims, block_keys, rows)
                .ok_or_else(|| corrupt(format!("class {} has a bad block", e.class)))?;
            let graph = match graph {
                Some((keys, blob)) => {
                    let free_slots = usize::try_from(e.free_slots).unwrap_or(usize::MAX);
                    Some(AnnIndex::from_blob(cfg, blob.path(), keys, free_slots, &corrupt)?)
                }
                None => None,
            };
            let class = Class { graph, block };
            let keys = class.block.keys.iter().copied().chain(class.graph.as_ref().map(AnnIndex::keys).unwrap_or_default());
            for key in keys {
                if state.key_class.insert(key, e.class).is_some() {
                    return Err(corrupt(format!("key {key} is in two places")));
                }
            }
            state.classes.insert(e.class, class);
        }
        Ok((ClassedIndex::wrap(cfg, graph_min_count, state), header.watermark))
    }
}
