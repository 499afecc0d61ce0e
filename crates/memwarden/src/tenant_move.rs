//! `memwarden tenant export|import`: move one tenant between stores (SQLite data directories
//! and PostgreSQL schemas, either way) as a `memwarden-tenant/1` JSON Lines file that carries
//! its verdict log verbatim and every row the log binds. The format and all checks live in
//! `memwarden_store::transfer`; this is the wiring.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use memwarden_core::prelude::*;
use memwarden_engine::EngineError;
use memwarden_store::transfer::{Exported, Imported, TransferError};
use memwarden_store::{SqliteStore, StoreConfig};
use memwarden_store_pg::{PgConfig, PostgresStore};
use serde_json::json;

/// `memwarden tenant ...`.
#[derive(Subcommand)]
pub(crate) enum TenantCmd {
    /// Export --tenant's verdict log (verbatim) and every row it binds to a JSON Lines file,
    /// from --data (SQLite) or from --store postgres://...; refuses a tenant that does not
    /// verify. The file holds the tenant's memories: keep it as private as the store.
    Export(Where),
    /// Import a tenant exported with `tenant export` into --data (SQLite) or --store
    /// postgres://...: the same log (size, root, head), verified with every row before one
    /// all-or-nothing commit, then a checkpoint signed by the target's key. Refuses a tenant
    /// the target already has, a file that does not verify, and a truncated file.
    Import(Where),
}

/// The file and the store.
#[derive(Args)]
pub(crate) struct Where {
    /// The JSON Lines file (`-`: stdout for export, stdin for import).
    #[arg(long)]
    jsonl: PathBuf,
    /// A PostgreSQL store (postgres://user@host/db?schema=NAME, or a libpq string with
    /// schema=NAME) instead of the --data directory.
    #[arg(long)]
    store: Option<String>,
    /// The PostgreSQL store's signing-key directory (default <data>/store-key, as for `serve`).
    #[arg(long)]
    store_key_dir: Option<PathBuf>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn fail(e: impl std::fmt::Display) -> EngineError {
    EngineError::Invalid(e.to_string())
}

fn refused(what: &str, e: TransferError) -> EngineError {
    EngineError::Invalid(format!("{what} refused: {e}"))
}

fn pg(spec: &str, data: &Path, key_dir: Option<&PathBuf>) -> Result<PostgresStore, EngineError> {
    let key_dir = key_dir.cloned().unwrap_or_else(|| data.join("store-key"));
    PostgresStore::open(PgConfig::from_spec(spec, key_dir)).map_err(fail)
}

fn log_json(size: u64, root: &[u8; 32], head: &[u8; 32]) -> serde_json::Value {
    json!({"size": size, "root": hex::encode(root), "head": hex::encode(head)})
}

/// Write to `path` through a private temporary file renamed into place, so a failed export
/// leaves no file.
fn export_to(path: &Path, f: impl FnOnce(&mut dyn Write) -> Result<Exported, TransferError>) -> Result<Exported, EngineError> {
    if path.as_os_str() == "-" {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        return f(&mut out).map_err(|e| refused("export", e));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "export".into());
    let tmp = path.with_file_name(format!(".{name}.partial"));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let file = o.open(&tmp).map_err(|e| fail(format!("{}: {e}", tmp.display())))?;
    let mut out = std::io::BufWriter::new(file);
    let res = f(&mut out).and_then(|r| {
        let file = out.into_inner().map_err(|e| TransferError::Io(e.to_string()))?;
        file.sync_all().map_err(|e| TransferError::Io(e.to_string()))?;
        Ok(r)
    });
    match res {
        Ok(r) => {
            std::fs::rename(&tmp, path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
            Ok(r)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(refused("export", e))
        }
    }
}

fn import_from(path: &Path, f: impl FnOnce(&mut dyn BufRead) -> Result<Imported, TransferError>) -> Result<Imported, EngineError> {
    if path.as_os_str() == "-" {
        let mut src = std::io::BufReader::new(std::io::stdin().lock());
        return f(&mut src).map_err(|e| refused("import", e));
    }
    let file = std::fs::File::open(path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    f(&mut std::io::BufReader::new(file)).map_err(|e| refused("import", e))
}

/// Run `tenant export|import` for `tenant` over `data` (SQLite) or the command's `--store`.
pub(crate) fn run(cmd: &TenantCmd, data: &Path, tenant: &str) -> Result<(), EngineError> {
    match cmd {
        TenantCmd::Export(w) => {
            let tenant = TenantId::new(tenant).map_err(|e| fail(format!("tenant: {e}")))?;
            let exported = match &w.store {
                Some(spec) => {
                    let store = pg(spec, data, w.store_key_dir.as_ref())?;
                    export_to(&w.jsonl, |out| store.export_tenant(&tenant, now_ms(), out))?
                }
                None => {
                    let store = SqliteStore::open(data, StoreConfig::default())?;
                    export_to(&w.jsonl, |out| store.export_tenant(&tenant, now_ms(), out))?
                }
            };
            let summary = json!({
                "exported": exported.tenant, "file": w.jsonl, "log": log_json(exported.log.size, &exported.log.root, &exported.log.head), "counts": exported.counts,
            });
            if w.jsonl.as_os_str() == "-" {
                eprintln!("{summary}");
            } else {
                println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
            }
        }
        TenantCmd::Import(w) => {
            let imported = match &w.store {
                Some(spec) => {
                    let store = pg(spec, data, w.store_key_dir.as_ref())?;
                    import_from(&w.jsonl, |src| store.import_tenant(src, now_ms()))?
                }
                None => import_from(&w.jsonl, |src| SqliteStore::import_tenant(data, StoreConfig::default(), src, now_ms()))?,
            };
            let summary = json!({
                "imported": imported.tenant, "log": log_json(imported.log.size, &imported.log.root, &imported.log.head), "counts": imported.counts,
                "checkpoint": imported.checkpoint,
            });
            println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
        }
    }
    Ok(())
}
