//! The crate's error type.

/// What can go wrong deriving a distribution.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A partition or view the closed forms do not cover yet.
    #[error("weft-dist: not supported yet: {0}")]
    Unsupported(String),
    /// Moving boxes between ranks failed, or a plan and the data disagree.
    #[error("weft-dist: transfer: {0}")]
    Transfer(String),
    /// The job stopped (on this rank, or on another that told it) while its ranks
    /// exchanged data.
    #[error("stopped: {0}")]
    Stopped(String),
}
