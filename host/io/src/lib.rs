//! Weft's file formats: Matrix Market (`.mtx`) for sparse matrices and NumPy's `.npy` for
//! arrays. Applications and examples use them to read inputs and write results.
//!
//! It depends on nothing of Weft's: the facade (`weft`) and the examples depend on it.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod matrix_market;
pub mod npy;

/// What can go wrong reading or writing a file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file system failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A Matrix Market (`.mtx`) file could not be parsed.
    #[error("matrix market {source_name}: line {line}: {message}")]
    MatrixMarket {
        /// The file's path, or `<string>` for text parsed from memory.
        source_name: String,
        /// The 1-based line where the problem is.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An `.npy` file (or its bytes) is not one this module reads, or an array does not fit
    /// its shape.
    #[error("npy {source_name}: {message}")]
    Npy {
        /// The file's path, or `<bytes>`.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// Data that cannot be written as asked (inconsistent triplets, ...).
    #[error("{0}")]
    Invalid(String),
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
