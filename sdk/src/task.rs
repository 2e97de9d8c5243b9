//! Declaring index tasks and launching them over partitions.

use crate::host::{self, IndexTask, TaskArg};
use crate::{Error, Partition, Privilege, Scalar, Store, Tiling};

/// A launch domain and the tiling that splits arrays of one shape over it, as the host prefers.
///
/// Element-wise tasks over arrays of one shape should all use the same `Launch`, so that their
/// partitions are equal and the host can fuse them.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The launch domain's extents (`0..domain[d]` per dimension).
    pub domain: Vec<u64>,
    /// The tiling of an array of the shape this launch was made for.
    pub tiling: Tiling,
}

impl Launch {
    /// The host's preferred launch for an array of this shape.
    pub fn preferred(shape: &[u64]) -> Launch {
        let (domain, tiling) = host::preferred_tiling(shape);
        Launch { domain, tiling }
    }

    /// A launch of one point.
    pub fn single() -> Launch {
        Launch {
            domain: Vec::new(),
            tiling: Tiling {
                tile: Vec::new(),
                offset: Vec::new(),
                projection: Vec::new(),
            },
        }
    }

    /// The partition of an array of the launch's shape: its tiling.
    pub fn tiled(&self) -> Partition {
        Partition::Tiling(self.tiling.clone())
    }

    /// A partition of an array of rank `rank` whose dimension 0 is split like this launch's
    /// dimension 0 and whose other dimensions are whole (`extents` gives their sizes). Use it
    /// for the rows of a matrix whose row count is the launch's array length.
    pub fn rows(&self, extents: &[u64]) -> Partition {
        let Some(&rows) = self.tiling.tile.first() else {
            return Partition::None;
        };
        let mut tile = vec![rows];
        tile.extend(extents.iter().skip(1));
        let mut projection = vec![self.tiling.projection.first().copied().flatten()];
        projection.extend(std::iter::repeat_n(None, extents.len().saturating_sub(1)));
        Partition::Tiling(Tiling {
            tile,
            offset: vec![0; extents.len()],
            projection,
        })
    }
}

/// An index task being declared: a kernel key, a launch domain, store arguments and scalars.
///
/// ```no_run
/// # use weft_sdk::{Error, Launch, Privilege, Store, Task};
/// # fn add(a: &Store, b: &Store, out: &Store) -> Result<(), Error> {
/// let launch = Launch::preferred(&a.shape());
/// Task::new("add.f64.1", &launch)
///     .arg(a, launch.tiled(), Privilege::Read)
///     .arg(b, launch.tiled(), Privilege::Read)
///     .arg(out, launch.tiled(), Privilege::Write)
///     .submit()?;
/// # Ok(())
/// # }
/// ```
pub struct Task<'a> {
    kernel: String,
    launch: Vec<u64>,
    args: Vec<TaskArg<'a>>,
    scalars: Vec<Scalar>,
}

impl<'a> Task<'a> {
    /// A task running kernel `kernel` (a key the plugin's `kernel` export understands) once per
    /// point of `launch`.
    pub fn new(kernel: impl Into<String>, launch: &Launch) -> Task<'a> {
        Task {
            kernel: kernel.into(),
            launch: launch.domain.clone(),
            args: Vec::new(),
            scalars: Vec::new(),
        }
    }

    /// Adds a store argument; the kernel's store parameters follow the order of these calls.
    pub fn arg(mut self, store: &'a Store, partition: Partition, privilege: Privilege) -> Self {
        self.args.push(TaskArg {
            store,
            partition,
            privilege,
        });
        self
    }

    /// Adds a scalar argument; the kernel's scalar parameters follow the order of these calls.
    pub fn scalar(mut self, value: Scalar) -> Self {
        self.scalars.push(value);
        self
    }

    /// Submits the task to the host's window.
    pub fn submit(self) -> Result<(), Error> {
        host::submit(&IndexTask {
            kernel: self.kernel,
            launch: self.launch,
            args: self.args,
            scalars: self.scalars,
        })
    }
}
