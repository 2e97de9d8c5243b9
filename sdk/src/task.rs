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
    /// The parameters of the kernel's definition, when the task was made with [`Task::of`].
    expected: Option<Result<Vec<weft_ir::Param>, String>>,
    /// Whether [`Task::declared_arg`] found no declared privilege for a store.
    undeclared: bool,
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
            expected: None,
            undeclared: false,
        }
    }

    /// A task running the kernel `def` defines, once per point of `launch`: its key comes
    /// from the definition, and [`Task::submit`] checks the arguments against the
    /// definition's parameters (count, dtype, rank, privilege, scalar types) and names the
    /// first that differs.
    pub fn of(def: &impl crate::KernelDef, launch: &Launch) -> Task<'a> {
        let mut task = Task::new(def.key(), launch);
        task.expected = Some(def.params());
        task
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

    /// Adds a store argument with the privilege the kernel's definition declares for it (a
    /// task made with [`Task::of`]; the [`kernel!`](crate::kernel) macro's `task` method
    /// uses this). Without a definition, or past its last store, [`Task::submit`] fails.
    pub fn declared_arg(self, store: &'a Store, partition: Partition) -> Self {
        let declared = match &self.expected {
            Some(Ok(params)) => weft_ir::Param::stores(params)
                .get(self.args.len())
                .map(|&(_, _, privilege)| crate::wit_privilege(privilege)),
            _ => None,
        };
        let mut task = self.arg(store, partition, declared.unwrap_or(Privilege::Read));
        if declared.is_none() {
            task.undeclared = true;
        }
        task
    }

    /// Adds a scalar argument; the kernel's scalar parameters follow the order of these calls.
    pub fn scalar(mut self, value: Scalar) -> Self {
        self.scalars.push(value);
        self
    }

    /// Submits the task to the host's window.
    pub fn submit(self) -> Result<(), Error> {
        if self.undeclared && self.expected.as_ref().is_none_or(|e| e.is_ok()) {
            return Err(crate::error(format!(
                "task `{}`: a store argument has no declared privilege (the task has no \
                 kernel definition, or more stores than it declares)",
                self.kernel
            )));
        }
        if let Some(expected) = &self.expected {
            let params = expected.as_ref().map_err(|e| crate::error(e.clone()))?;
            self.check(params)
                .map_err(|why| crate::error(format!("task `{}`: {why}", self.kernel)))?;
        }
        host::submit(&IndexTask {
            kernel: self.kernel,
            launch: self.launch,
            args: self.args,
            scalars: self.scalars,
        })
    }

    /// Whether the arguments fit `params`, or the first that does not.
    fn check(&self, params: &[weft_ir::Param]) -> Result<(), String> {
        let stores: Vec<_> = self
            .args
            .iter()
            .map(|a| {
                (
                    crate::ir_dtype(a.store.dtype()),
                    a.store.shape().len() as u32,
                    crate::ir_privilege(a.privilege),
                )
            })
            .collect();
        let scalars: Vec<_> = self
            .scalars
            .iter()
            .map(|s| crate::ir_scalar(*s).dtype())
            .collect();
        check_args(params, &stores, &scalars)
    }
}

/// Whether store arguments (dtype, rank, privilege) and scalar arguments (dtype) fit a
/// kernel's `params`, or the first that does not.
fn check_args(
    params: &[weft_ir::Param],
    stores: &[(weft_ir::DType, u32, weft_ir::Privilege)],
    scalars: &[weft_ir::DType],
) -> Result<(), String> {
    let want_stores = weft_ir::Param::stores(params);
    let want_scalars = weft_ir::Param::scalars(params);
    if want_stores.len() != stores.len() || want_scalars.len() != scalars.len() {
        return Err(format!(
            "the kernel takes {} stores and {} scalars, the task passes {} and {}",
            want_stores.len(),
            want_scalars.len(),
            stores.len(),
            scalars.len()
        ));
    }
    for (i, (got, want)) in stores.iter().zip(&want_stores).enumerate() {
        if got != want {
            let ((gd, gr, gp), (wd, wr, wp)) = (got, want);
            return Err(format!(
                "store argument {i} is a rank-{gr} {gd} store with {gp:?}, the kernel's \
                 parameter is a rank-{wr} {wd} store with {wp:?}"
            ));
        }
    }
    for (i, (got, want)) in scalars.iter().zip(&want_scalars).enumerate() {
        if got != want {
            return Err(format!(
                "scalar argument {i} is {got}, the kernel's parameter is {want}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weft_ir::{DType, Param, Privilege, ReduceOp};

    use super::check_args;

    fn params() -> Vec<Param> {
        vec![
            Param::Store {
                dtype: DType::F64,
                rank: 2,
                privilege: Privilege::Read,
            },
            Param::Store {
                dtype: DType::F64,
                rank: 0,
                privilege: Privilege::Reduce(ReduceOp::Sum),
            },
            Param::Scalar { dtype: DType::F64 },
        ]
    }

    #[test]
    fn arguments_that_fit_pass() {
        let stores = [
            (DType::F64, 2, Privilege::Read),
            (DType::F64, 0, Privilege::Reduce(ReduceOp::Sum)),
        ];
        assert_eq!(check_args(&params(), &stores, &[DType::F64]), Ok(()));
    }

    #[test]
    fn the_first_argument_that_differs_is_named() {
        let stores = [
            (DType::F64, 2, Privilege::Read),
            (DType::F32, 0, Privilege::Reduce(ReduceOp::Sum)),
        ];
        let e = check_args(&params(), &stores, &[DType::F64]).unwrap_err();
        assert!(e.contains("store argument 1 is a rank-0 f32"), "{e}");
        let stores = [
            (DType::F64, 1, Privilege::Read),
            (DType::F64, 0, Privilege::Reduce(ReduceOp::Sum)),
        ];
        let e = check_args(&params(), &stores, &[DType::F64]).unwrap_err();
        assert!(e.contains("store argument 0 is a rank-1"), "{e}");
        let stores = [
            (DType::F64, 2, Privilege::Read),
            (DType::F64, 0, Privilege::Write),
        ];
        let e = check_args(&params(), &stores, &[DType::F64]).unwrap_err();
        assert!(e.contains("Write") && e.contains("Reduce"), "{e}");
        let e = check_args(&params(), &stores[..1], &[DType::F64]).unwrap_err();
        assert!(
            e.contains("takes 2 stores and 1 scalars, the task passes 1 and 1"),
            "{e}"
        );
        let stores = [
            (DType::F64, 2, Privilege::Read),
            (DType::F64, 0, Privilege::Reduce(ReduceOp::Sum)),
        ];
        let e = check_args(&params(), &stores, &[DType::I64]).unwrap_err();
        assert!(e.contains("scalar argument 0 is i64"), "{e}");
    }
}
