//! The host's one error type.

/// Everything that can go wrong in the host. Errors caused by a plugin name the plugin and the
/// call; errors in a kernel name the kernel (whose name carries its provenance).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin call returned an error of its own (bad shapes, bad dtypes, ...).
    #[error("plugin `{plugin}`, call `{call}`: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// The export that was called.
        call: String,
        /// The plugin's message.
        message: String,
    },
    /// A plugin trapped, ran past its time limit or grew past its memory cap. The plugin is
    /// re-instantiated and usable again.
    #[error("plugin `{plugin}`, call `{call}`: {fault}")]
    PluginFault {
        /// The plugin's name.
        plugin: String,
        /// The export that was called.
        call: String,
        /// What happened.
        fault: String,
    },
    /// A component could not be loaded.
    #[error("cannot load plugin `{plugin}`: {message}")]
    Load {
        /// The plugin's name or path.
        plugin: String,
        /// Why.
        message: String,
    },
    /// A plugin handed the host invalid kernel IR.
    #[error("plugin `{plugin}`, kernel `{key}`: {source}")]
    InvalidIr {
        /// The plugin's name.
        plugin: String,
        /// The kernel key.
        key: String,
        /// What the validator found.
        source: weft_ir::ValidateError,
    },
    /// A task was malformed (wrong argument count, mismatched partition, ...).
    #[error("plugin `{plugin}`, task `{kernel}`: {message}")]
    InvalidTask {
        /// The plugin's name.
        plugin: String,
        /// The task's kernel key.
        kernel: String,
        /// What is wrong.
        message: String,
    },
    /// A kernel failed to compile.
    #[error("kernel `{kernel}`: compile failed: {message}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// Why.
        message: String,
    },
    /// A compiled kernel stopped at run time (for example an index out of bounds).
    #[error("kernel `{kernel}`: {message}")]
    KernelFault {
        /// The kernel's name.
        kernel: String,
        /// What happened.
        message: String,
    },
    /// The application used the API wrongly (shape or dtype mismatch, unknown plugin, ...).
    #[error("{0}")]
    Usage(String),
    /// An I/O error (the component cache, `.npy` files).
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
}

/// The host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
