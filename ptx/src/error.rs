//! The PTX back end's one error type.

/// What can go wrong generating or running PTX.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel uses something the PTX emitter does not lower (yet); the message says what.
    #[error("kernel `{kernel}`: the PTX back end cannot compile it: {message}")]
    Unsupported {
        /// The kernel's name.
        kernel: String,
        /// What it uses.
        message: String,
    },
}

/// The PTX back end's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
