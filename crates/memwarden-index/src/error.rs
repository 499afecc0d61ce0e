//! The error type.

use std::path::PathBuf;

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A configuration value or argument is outside its limit.
    #[error("{field} = {value} is outside the allowed range {min}..={max}")]
    Config {
        /// Which setting.
        field: &'static str,
        /// The value given.
        value: usize,
        /// Smallest allowed value.
        min: usize,
        /// Largest allowed value.
        max: usize,
    },
    /// A vector (or query) has the wrong number of dimensions.
    #[error("vector has {got} dimensions, the index holds {expected}-dimensional vectors")]
    WrongDims {
        /// The index's dimensions.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// A vector component is NaN or infinite.
    #[error("vector component {position} is not a finite number")]
    NonFinite {
        /// Index of the first bad component.
        position: usize,
    },
    /// A vector has zero length, so its cosine similarity is undefined.
    #[error("vector has zero length (cosine similarity is undefined)")]
    ZeroVector,
    /// The key is reserved by the backend (usearch marks free slots with `u64::MAX`).
    #[error("key {0} is reserved and cannot be stored")]
    ReservedKey(u64),
    /// The index already holds [`crate::MAX_VECTORS_COUNT`] vectors.
    #[error("the index is full ({max} vectors)")]
    Full {
        /// The limit.
        max: usize,
    },
    /// A [`crate::ClassedIndex`] already holds [`crate::MAX_CLASSES_COUNT`] classes.
    #[error("the index already holds the most access classes allowed ({max})")]
    TooManyClasses {
        /// The limit.
        max: usize,
    },
    /// The caller's permission filter panicked; nothing is returned rather than guessing.
    #[error("the permission filter panicked; the guarded search returned nothing")]
    FilterPanicked,
    /// The usearch backend reported an error.
    #[error("vector index backend: {0}")]
    Backend(String),
    /// Reading or writing an index file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An index file is damaged, truncated or inconsistent; rebuild the index from the store.
    #[error("index file {} is unusable: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An index file was written by another format version; rebuild the index from the store.
    #[error("index file {} has format version {found}; this build reads version {expected}", path.display())]
    FormatVersion {
        /// The file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// An index file holds vectors of other dimensions than the caller expects (e.g. after an
    /// embedding model change); rebuild the index from the store.
    #[error("index file {} holds {found}-dimensional vectors; expected {expected}", path.display())]
    DimsMismatch {
        /// The file.
        path: PathBuf,
        /// Dimensions in the file.
        found: usize,
        /// Dimensions the caller expects.
        expected: usize,
    },
}

impl IndexError {
    /// Wraps a usearch exception (`cxx::Exception`, which implements `Display`).
    pub(crate) fn backend(e: impl std::fmt::Display) -> Self {
        Self::Backend(e.to_string())
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}
