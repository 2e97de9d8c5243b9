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
    /// The CUDA driver is not there: the GPU back end cannot start.
    #[error("no GPU back end: {0}")]
    NoDriver(String),
    /// The CUDA driver refused something (a context, an allocation, a module, a launch).
    #[error("gpu back end: {0}")]
    Driver(String),
    /// A kernel's index check failed on the device, or a launch's arguments do not fit.
    #[error("kernel `{kernel}`: {message}")]
    KernelFault {
        /// The kernel's name.
        kernel: String,
        /// What happened.
        message: String,
    },
    /// The device met an error that ends its context (an illegal address, a launch that
    /// failed on the device): every later call of every runtime on it fails with this, and
    /// the process must start a new one to use the GPU again.
    #[error("the GPU was lost: {0}")]
    DeviceLost(String),
    /// Device memory: a buffer that does not exist, a copy outside a buffer.
    #[error("gpu back end: {0}")]
    Memory(String),
}

impl From<Error> for weft_runtime::Error {
    fn from(e: Error) -> weft_runtime::Error {
        match e {
            Error::Unsupported { kernel, message } => {
                weft_runtime::Error::Compile { kernel, message }
            }
            Error::KernelFault { kernel, message } => {
                weft_runtime::Error::KernelFault { kernel, message }
            }
            Error::DeviceLost(message) => weft_runtime::Error::Backend {
                backend: "ptx",
                message: format!("the GPU was lost: {message}"),
            },
            Error::NoDriver(message) | Error::Driver(message) | Error::Memory(message) => {
                weft_runtime::Error::Backend {
                    backend: "ptx",
                    message,
                }
            }
        }
    }
}

/// The PTX back end's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
