//! Index tasks as the runtime keeps them.

use std::sync::Arc;

use weft_ir::{Privilege, Scalar};

use crate::kernel::KernelEntry;
use crate::partition::{Partition, RootPartition};
use crate::stores::{StorageId, StoreId, StoreInfo};

/// The index of a loaded plugin in its runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PluginId(pub u32);

/// The id of the tasks an application submits itself, with kernels it wrote (no plugin
/// loads this many).
pub const APPLICATION: PluginId = PluginId(u32::MAX);

/// One store argument of a task.
#[derive(Clone, Debug)]
pub struct TaskArg {
    /// The store (a root or a view).
    pub store: StoreId,
    /// The root storage the store lives in.
    pub storage: StorageId,
    /// The partition, as the plugin stated it on the store.
    pub partition: Partition,
    /// The partition folded into root-storage coordinates.
    pub root_partition: RootPartition,
    /// What the task does to the store.
    pub privilege: Privilege,
    /// Whether the store is a temporary of a fused task: each point gets a scratch buffer the
    /// size of its tile, and the store's storage is never touched.
    pub local: bool,
    /// `Some(h)` when the task's stores to this argument are deferred (see
    /// [`crate::Binding`]'s `deferred`): fusion through a bounded anti-dependence sets it, with
    /// `h` the most rows (dimension 0) by which the task reads the same storage shifted.
    pub deferred: Option<u32>,
}

impl TaskArg {
    /// An argument as a plugin states it: the runtime folds the partition into root
    /// coordinates when the task is submitted.
    pub fn new(store: StoreId, partition: Partition, privilege: Privilege) -> TaskArg {
        TaskArg {
            store,
            storage: StorageId(0),
            partition,
            root_partition: RootPartition::scalar(),
            privilege,
            local: false,
            deferred: None,
        }
    }

    /// An argument with its partition already folded into root coordinates for a launch over
    /// `launch`, as [`Core::submit`](crate::Core::submit) folds it: for planners' tests and
    /// benchmarks that build windows without a core. (A tiling's fit is checked at submit, not
    /// here.)
    pub fn folded(
        stores: &crate::Stores,
        store: StoreId,
        partition: Partition,
        privilege: Privilege,
        launch: &[u64],
    ) -> crate::Result<TaskArg> {
        let info = stores.get(store)?;
        let mut root_partition = RootPartition::fold(&partition, &info.map);
        root_partition.normalize_for(launch);
        Ok(TaskArg {
            store,
            storage: info.storage,
            partition,
            root_partition,
            privilege,
            local: false,
            deferred: None,
        })
    }
}

/// An index task in the window.
#[derive(Clone, Debug)]
pub struct IndexTask {
    /// Its place in program order (unique, increasing).
    pub seq: u64,
    /// The plugin that submitted it.
    pub plugin: PluginId,
    /// The kernel it runs.
    pub kernel: Arc<KernelEntry>,
    /// The launch domain `0..launch[d]`.
    pub launch: crate::Dims<u64>,
    /// Store arguments.
    pub args: Vec<TaskArg>,
    /// Scalar arguments.
    pub scalars: Vec<Scalar>,
}

impl IndexTask {
    /// A task of `plugin` running `kernel` over `launch`, before submission (the runtime gives
    /// it its sequence number).
    pub fn new(
        plugin: PluginId,
        kernel: Arc<KernelEntry>,
        launch: impl Into<crate::Dims<u64>>,
        args: Vec<TaskArg>,
        scalars: Vec<Scalar>,
    ) -> IndexTask {
        IndexTask {
            seq: 0,
            plugin,
            kernel,
            launch: launch.into(),
            args,
            scalars,
        }
    }

    /// The name of its kernel (its provenance).
    pub fn name(&self) -> &str {
        self.kernel.name()
    }
}

/// Checks that a task's arguments match its kernel's parameters.
pub fn check_against_kernel(
    task: &IndexTask,
    kernel: &KernelEntry,
    info: impl Fn(StoreId) -> Option<(usize, weft_ir::DType)>,
) -> Result<(), String> {
    // The entry's signature, computed once: this runs for every submitted task.
    let (stores, scalars) = (kernel.store_signature(), kernel.scalar_signature());
    let name = kernel.name();
    if stores.len() != task.args.len() {
        return Err(format!(
            "kernel `{name}` takes {} stores, the task passes {}",
            stores.len(),
            task.args.len()
        ));
    }
    if scalars.len() != task.scalars.len() {
        return Err(format!(
            "kernel `{name}` takes {} scalars, the task passes {}",
            scalars.len(),
            task.scalars.len()
        ));
    }
    for (i, (&(dtype, rank, privilege), arg)) in stores.iter().zip(&task.args).enumerate() {
        let rank = rank as usize;
        let (arg_rank, arg_dtype) =
            info(arg.store).ok_or_else(|| format!("store argument {i} does not exist"))?;
        if arg_rank != rank || arg_dtype != dtype {
            return Err(format!(
                "store argument {i} is {arg_dtype} of rank {arg_rank}, kernel `{name}` expects {dtype} of rank {rank}"
            ));
        }
        if arg.privilege != privilege {
            return Err(format!(
                "store argument {i} is passed with privilege {:?}, kernel `{name}` declares {privilege:?}",
                arg.privilege
            ));
        }
    }
    for (i, (&want, got)) in scalars.iter().zip(&task.scalars).enumerate() {
        if want != got.dtype() {
            return Err(format!(
                "scalar argument {i} is {}, kernel `{name}` expects {want}",
                got.dtype()
            ));
        }
    }
    Ok(())
}

/// Shape facts of a store argument that a task check needs.
pub fn arg_info(info: &StoreInfo) -> (usize, weft_ir::DType) {
    (info.shape.len(), info.dtype)
}
