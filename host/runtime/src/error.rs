//! The runtime's one error type.

/// What can go wrong in the runtime core. Errors caused by a plugin's task or kernel name the
/// plugin and the kernel; errors in a running kernel name the kernel, whose name carries its
/// provenance.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// A plugin handed the host kernel IR that does not validate.
    #[error("plugin `{plugin}`, kernel `{key}`: {message}")]
    InvalidIr {
        /// The plugin's name.
        plugin: String,
        /// The kernel key.
        key: String,
        /// What the flat form's decoder or the validator found.
        message: String,
    },
    /// A plugin could not produce the body of a kernel it submitted a task for.
    #[error("plugin `{plugin}`, kernel `{key}`: {message}")]
    KernelSource {
        /// The plugin's name.
        plugin: String,
        /// The kernel key.
        key: String,
        /// What happened.
        message: String,
    },
    /// A task was malformed (argument count, a partition that does not fit, ...).
    #[error("plugin `{plugin}`, task `{kernel}`: {message}")]
    InvalidTask {
        /// The plugin's name.
        plugin: String,
        /// The task's kernel.
        kernel: String,
        /// What is wrong.
        message: String,
    },
    /// A back end could not compile a kernel.
    #[error("kernel `{kernel}`: compile failed: {message}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// Why.
        message: String,
    },
    /// A kernel would have been compiled while compiling is forbidden
    /// (`Core::forbid_compiles`).
    #[error(
        "kernel `{kernel}` would be compiled, but compiling is forbidden now \
         (Runtime::forbid_compiles)"
    )]
    CompileForbidden {
        /// The kernel's name.
        kernel: String,
    },
    /// A compiled kernel stopped at run time (for example an index out of bounds).
    #[error("kernel `{kernel}`: {message}")]
    KernelFault {
        /// The kernel's name.
        kernel: String,
        /// What happened.
        message: String,
    },
    /// A back end failed at something other than a kernel (memory, a device).
    #[error("{backend} back end: {message}")]
    Backend {
        /// The back end's name.
        backend: &'static str,
        /// What happened.
        message: String,
    },
    /// A task did not run, or its results were lost, because another task failed: it used a
    /// store that the failure left without a value, or it ran fused with the failing task.
    #[error("plugin `{plugin}`, task `{kernel}`: {message}")]
    NotRun {
        /// The plugin that submitted the task.
        plugin: String,
        /// The task's kernel.
        kernel: String,
        /// What happened, naming the failure.
        message: String,
    },
    /// A store would take its owner (a plugin, or the whole runtime: the tenant) past its
    /// quota of store bytes.
    #[error(
        "{owner}: a store of shape {shape} ({bytes} bytes) would bring its stores to {total} bytes, over its quota of {quota} bytes"
    )]
    Quota {
        /// Whose quota: `plugin `name`` or `the runtime`.
        owner: String,
        /// The store's shape, as text.
        shape: String,
        /// The store's bytes.
        bytes: u64,
        /// What the owner's stores would hold with it.
        total: u64,
        /// The quota.
        quota: u64,
    },
    /// A read of a store would return more bytes than its reader (a plugin, or the whole
    /// runtime: the tenant) may hold in one store: reads are charged like stores
    /// (`Core::read_bytes_as`), a broadcast view in full.
    #[error(
        "{owner}: a read of a store of shape {shape} would return {bytes} bytes, over its quota of {quota} bytes"
    )]
    ReadQuota {
        /// Whose quota: `plugin `name`` or `the runtime`.
        owner: String,
        /// The store's shape, as text.
        shape: String,
        /// The bytes the read would return.
        bytes: u64,
        /// The quota.
        quota: u64,
    },
    /// The caller used the runtime wrongly: a store that does not exist, data of the wrong
    /// size, a store too large.
    #[error("{0}")]
    Usage(String),
    /// An invariant of the runtime itself broke: a bug in Weft, not in a plugin or an
    /// application.
    #[error("internal error (a bug in Weft): {0}")]
    Internal(String),
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The same error, its message ending with `(from the call at SITES)`: where in the
    /// application the failing work was asked for (`sites` lists them, comma-separated,
    /// when tasks of several calls ran together).
    pub fn from_call_at(self, sites: &str) -> Error {
        self.map_message(|m| format!("{m} (from the call at {sites})"))
    }

    /// The same error, its message saying that `more` other failures happened with it (reads
    /// of the stores they left without a value report them).
    pub fn with_more_failures(self, more: u64) -> Error {
        self.map_message(|m| {
            format!(
                "{m} (and {more} more failed task(s); a read of a store they wrote reports \
                 its own)"
            )
        })
    }

    /// The same error with its message passed through `add`; errors without a free-form
    /// message stay as they are.
    fn map_message(self, add: impl FnOnce(String) -> String) -> Error {
        match self {
            Error::InvalidIr {
                plugin,
                key,
                message,
            } => Error::InvalidIr {
                plugin,
                key,
                message: add(message),
            },
            Error::KernelSource {
                plugin,
                key,
                message,
            } => Error::KernelSource {
                plugin,
                key,
                message: add(message),
            },
            Error::InvalidTask {
                plugin,
                kernel,
                message,
            } => Error::InvalidTask {
                plugin,
                kernel,
                message: add(message),
            },
            Error::NotRun {
                plugin,
                kernel,
                message,
            } => Error::NotRun {
                plugin,
                kernel,
                message: add(message),
            },
            Error::Compile { kernel, message } => Error::Compile {
                kernel,
                message: add(message),
            },
            Error::KernelFault { kernel, message } => Error::KernelFault {
                kernel,
                message: add(message),
            },
            Error::Backend { backend, message } => Error::Backend {
                backend,
                message: add(message),
            },
            Error::Usage(message) => Error::Usage(add(message)),
            Error::Internal(message) => Error::Internal(add(message)),
            other @ (Error::CompileForbidden { .. }
            | Error::Quota { .. }
            | Error::ReadQuota { .. }) => other,
        }
    }
}
