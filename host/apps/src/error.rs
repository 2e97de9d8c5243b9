//! The crate's error type.

/// What can go wrong running an application component. Every message names the application
/// and, where there is one, the call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a component this host can run (not Wasm, a core module, or a
    /// component that imports what no loaded plugin serves).
    #[error("application `{app}`: {message}")]
    Load {
        /// The application's name.
        app: String,
        /// What is wrong with it.
        message: String,
    },
    /// The application trapped, ran past a limit, or a call it made failed in a way that
    /// stops it (a plugin trapped); the job ends, the host and its other jobs go on.
    #[error("application `{app}` failed: {message}")]
    Failed {
        /// The application's name.
        app: String,
        /// What happened, with the trap's or the call's message.
        message: String,
    },
    /// Setting up the host for applications failed.
    #[error("application host: {0}")]
    Host(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
