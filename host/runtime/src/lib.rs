//! Weft's runtime core: stores, partitions, index tasks, the window and the executor, and the
//! seams that the rest of Weft plugs into.
//!
//! What it owns:
//! - [`stores`]: stores, views and their split reference counts (no memory: a storage names a
//!   back end's buffer);
//! - [`partition`]: partitions of stores folded into root coordinates, with constant-time
//!   equality;
//! - [`task`]: index tasks as the window keeps them;
//! - [`kernel`]: the one kernel intake (flat IR to a validated, math-lowered, named kernel
//!   with a content id);
//! - [`limits`]: bounds on launches, arguments, store bytes and kernel time;
//! - [`window`]: the window's policy (grow, run the front, run what a read needs);
//! - [`executor`]: running a task's points through a back end;
//! - [`profile`]: the time of kernel runs per kernel (`WEFT_PROFILE=1`);
//! - [`trace`]: the back-end work of a repeated step, recorded and replayed;
//! - [`faults`]: fault isolation in the shared window (poisoned storages, attribution);
//! - [`mapping`]: which rank owns which point;
//! - [`core`]: the state plugin calls and the application share.
//!
//! It reports through `tracing`: a span per kernel run (`kernel`, with the kernel's name) and
//! per compile, the planner's explanations as events of target [`EXPLAIN_TARGET`], and a
//! summary of each run of the window as events of target [`SUMMARY_TARGET`]. It installs no
//! subscriber; the application (`weft`) does.
//!
//! The seams:
//! - [`Backend`] (memory, compile, launch, synchronize): `weft-cpu` implements it, and later
//!   the PTX back end;
//! - [`Planner`] (what runs together): `weft-fusion` implements it; [`NoFusion`] runs every
//!   task alone;
//! - [`Distribution`] (what crosses ranks): `weft-dist` implements it; one process has none.
//!
//! It must not depend on wasmtime, Cranelift, or any back end or plugin host: they depend on
//! it. [`testing`] has an interpreting back end for tests without Cranelift.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod backend;
pub mod cache;
pub mod cancel;
pub mod core;
pub mod diagnose;
pub mod distribution;
pub mod error;
pub mod executor;
pub mod faults;
pub mod handle;
pub mod kernel;
pub mod limits;
pub mod mapping;
pub mod matvec_grid;
pub mod observed;
pub mod partition;
pub mod planner;
pub mod private_dir;
pub mod products;
pub mod profile;
pub mod stores;
pub mod task;
pub mod testing;
pub mod trace;
pub mod view;
pub mod window;

/// The hash map of the runtime's own ids (stores, storages, sequence numbers): keys the host
/// assigns, hashed with a fast non-cryptographic hash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// The hash set of the runtime's own ids (see [`FastMap`]).
pub type FastSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;

/// A short per-dimension list (a shape, strides, a tile, a rectangle's corner): held inline
/// up to four dimensions, so that the views, partitions and rectangles made for every task do
/// not each allocate (they were most of a tiny task's allocations).
pub type Dims<T> = smallvec::SmallVec<[T; 4]>;

/// The crate of [`Dims`], for its `smallvec!` macro.
pub use smallvec;

pub use backend::{
    Backend, Binding, BufferId, MemoryStats, Prepared, check_element_sizes, check_view,
    confirm_hit, store_element_sizes, view_inside,
};
pub use cache::{BoundedCache, CacheLimits, CacheStats, Owner};
pub use cancel::CancelToken;
pub use core::{Core, EXPLAIN_TARGET, SUMMARY_TARGET, Settings, Stats};
pub use distribution::{DistContext, Distribution, Traffic};
pub use error::{Error, Result};
pub use executor::ExecStats;
pub use handle::StoreHandle;
pub use kernel::{KernelEntry, KernelId};
pub use limits::Limits;
pub use observed::{Observed, PrepareHook};
pub use partition::{Partition, Rect, RootPartition, Skew, Tiling};
pub use planner::{NoFusion, Plan, PlanContext, PlanSummary, Planner, PlannerStats};
pub use profile::{KernelProfile, Profile};
pub use stores::{StorageId, StoreId, Stores};
pub use task::{IndexTask, PluginId, TaskArg};
pub use trace::Trace;
pub use view::{ViewError, ViewMap, shape_text};
