//! The plugin host's one error type.

use std::time::Duration;

/// What went wrong with a plugin, told from wasmtime's own error types (never from the text
/// of a message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The call ran past its time limit and was interrupted (an epoch deadline).
    Timeout {
        /// The limit.
        limit: Duration,
    },
    /// The plugin tried to grow a memory past its cap.
    MemoryCap {
        /// The cap, in bytes.
        cap: usize,
        /// The size it asked for, in bytes.
        desired: usize,
    },
    /// The plugin tried to grow a table past its cap.
    TableCap {
        /// The number of elements it asked for.
        desired: usize,
    },
    /// Something below the call panicked in the host (a bug in Weft that a plugin's input
    /// reached); the panic was caught at the call's boundary and the runtime stays usable.
    HostPanic(String),
    /// The plugin panicked (an `unreachable` trap: a Rust guest built without WASI aborts on a
    /// panic this way).
    Panic,
    /// Another trap (out-of-bounds memory access, integer division by zero, ...).
    Trap(wasmtime::Trap),
    /// The plugin broke the host interface's rules (an unknown handle, a call to the host
    /// outside a call), or a host import failed.
    Host(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Timeout { limit } => write!(
                f,
                "ran past its time limit of {} ms and was stopped",
                limit.as_millis()
            ),
            Fault::MemoryCap { cap, desired } => write!(
                f,
                "tried to grow its memory to {desired} bytes, past the cap of {cap} bytes"
            ),
            Fault::TableCap { desired } => write!(
                f,
                "tried to grow a table to {desired} elements, past the cap of {}",
                crate::limits::TABLE_ELEMENTS
            ),
            Fault::HostPanic(m) => write!(
                f,
                "made the host panic ({m}); the panic was caught and the tasks of the call \
                 were dropped"
            ),
            Fault::Panic => write!(
                f,
                "trapped: unreachable code reached (a panic in the plugin)"
            ),
            Fault::Trap(t) => write!(f, "trapped: {t}"),
            Fault::Host(m) => write!(f, "failed: {m}"),
        }
    }
}

/// What can go wrong loading or calling a plugin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A component could not be loaded (not a component, imports that do not match the host,
    /// a bad name).
    #[error("cannot load plugin `{plugin}`: {message}")]
    Load {
        /// The plugin's name, or its place in the load order.
        plugin: String,
        /// Why.
        message: String,
    },
    /// A call trapped, ran past its time limit or grew past its memory cap. The plugin's
    /// instance is remade and usable again; the tasks the call had submitted are dropped.
    #[error("plugin `{plugin}`, call `{call}`: {fault}")]
    Fault {
        /// The plugin's name.
        plugin: String,
        /// The export that was called.
        call: String,
        /// What happened.
        fault: Fault,
    },
    /// A call returned an error of the plugin's own (bad shapes, bad dtypes, ...).
    #[error("plugin `{plugin}`, call `{call}`: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// The export that was called.
        call: String,
        /// The plugin's message.
        message: String,
    },
    /// The caller used the plugin host wrongly (an unknown plugin, arguments that do not fit
    /// an export's types).
    #[error("{0}")]
    Usage(String),
    /// The runtime core failed while serving a call.
    #[error(transparent)]
    Runtime(#[from] weft_runtime::Error),
}

/// The plugin host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
