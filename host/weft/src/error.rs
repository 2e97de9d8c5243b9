//! The facade's one error type: the error of whichever part failed, or a misuse of the facade.

/// Everything that can go wrong in an application's use of Weft. Errors caused by a plugin
/// name the plugin and the call; errors in a kernel name the kernel (whose name carries its
/// provenance).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime core: an invalid task or kernel, a kernel fault, a compile error.
    #[error(transparent)]
    Runtime(#[from] weft_runtime::Error),
    /// The plugin host: loading a component, a plugin's fault or its own error.
    #[error(transparent)]
    Plugin(#[from] weft_plugin::Error),
    /// The CPU back end could not be started.
    #[error(transparent)]
    Cpu(#[from] weft_cpu::Error),
    /// The GPU back end could not be started (no driver, no device, a build without it).
    #[error("{0}")]
    Device(String),
    /// Reading or writing a file.
    #[error(transparent)]
    Io(#[from] weft_io::Error),
    /// The application used the facade wrongly (a shape or dtype mismatch it checks itself,
    /// `item()` of an array of many elements, an array poisoned by an earlier error).
    #[error("{0}")]
    Usage(String),
    /// An error of a facade call, with the application's source line that made the call
    /// (the facade's methods are `#[track_caller]`).
    #[error("{source} (at {site})")]
    At {
        /// `file:line:column` of the call.
        site: String,
        /// What went wrong.
        source: Box<Error>,
    },
}

/// The facade's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
