//! The CPU back end's one error type.

/// What can go wrong compiling or running a kernel on the CPU.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kernel could not be compiled (invalid IR given to [`crate::CpuBackend::compile`], or a
    /// limit of the lowering).
    #[error("kernel `{kernel}`: compile failed: {message}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// Why.
        message: String,
    },
    /// A compiled kernel stopped at run time (an index out of bounds, arguments that do not
    /// fit its parameters).
    #[error("kernel `{kernel}`: {message}")]
    KernelFault {
        /// The kernel's name.
        kernel: String,
        /// What happened.
        message: String,
    },
    /// The back end's memory: an allocation that failed, a buffer that does not exist, a copy
    /// or binding outside a buffer.
    #[error("cpu back end: {0}")]
    Memory(String),
    /// The worker threads could not be started.
    #[error("cpu back end: cannot start worker threads: {0}")]
    Threads(String),
    /// A SIMD path this CPU (or this build) cannot run was chosen.
    #[error("cpu back end: {0}")]
    Simd(String),
}

/// The CPU back end's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for weft_runtime::Error {
    fn from(e: Error) -> weft_runtime::Error {
        match e {
            Error::Compile { kernel, message } => weft_runtime::Error::Compile { kernel, message },
            Error::KernelFault { kernel, message } => {
                weft_runtime::Error::KernelFault { kernel, message }
            }
            Error::Memory(message) | Error::Threads(message) | Error::Simd(message) => {
                weft_runtime::Error::Backend {
                    backend: "cpu",
                    message,
                }
            }
        }
    }
}
