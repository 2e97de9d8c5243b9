//! The crate's error type.

/// What can go wrong in the service or its client. Messages name the job, tenant or file
/// concerned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file is unreadable or invalid.
    #[error("service configuration: {0}")]
    Config(String),
    /// The job database failed (opening, reading or committing).
    #[error("job database: {0}")]
    Database(String),
    /// A file of the service's data directory could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Starting the service failed (binding its address, starting its threads).
    #[error("starting the service: {0}")]
    Start(String),
    /// Sending a job between the ranks of `mpirun` failed.
    #[error("ranks: {0}")]
    Ranks(String),
    /// A request of the client failed, or the server answered with an error.
    #[error("{0}")]
    Client(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error while doing `what`.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}
