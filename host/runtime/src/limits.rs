//! Bounds on what a plugin or an application may ask of one runtime core, checked where tasks
//! and stores enter it (before anything is allocated or run).
//!
//! One core serves one tenant, so [`Limits::store_bytes`] is the tenant's quota; each plugin
//! has its own quota on top (`weft_plugin::PluginLimits::store_bytes`), which the plugin host
//! passes to [`crate::Core::create_store_as`].

use std::time::Duration;

/// The bounds a core enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most points one launch domain may have (the product of its extents).
    pub launch_points: u64,
    /// The most store arguments one task may have.
    pub task_args: usize,
    /// The most bytes the stores of this core may hold at once, counted in full when a root
    /// store is created (views cost nothing). This is the tenant's quota.
    pub store_bytes: u64,
    /// The longest one kernel launch may run before it is cancelled (`None`: no limit). The
    /// back end enforces it (the CPU back end's compiled loops check a cancel flag on every
    /// back edge).
    pub kernel_time: Option<Duration>,
}

/// The default [`Limits::launch_points`]: far more points than any host prefers (a few per
/// thread or rank), few enough that per-point bookkeeping stays small.
pub const LAUNCH_POINTS: u64 = 1 << 24;

/// The default [`Limits::task_args`].
pub const TASK_ARGS: usize = 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            launch_points: LAUNCH_POINTS,
            task_args: TASK_ARGS,
            store_bytes: u64::MAX,
            kernel_time: None,
        }
    }
}

/// The number of points of a launch domain, or `None` where the product overflows.
pub fn launch_points(launch: &[u64]) -> Option<u64> {
    launch.iter().try_fold(1u64, |acc, &e| acc.checked_mul(e))
}
