//! Kernels an application writes itself: a loop over elements (a recurrence along an axis,
//! a byte-at-a-time checksum) as one task with a sequential loop inside, instead of one
//! task per element.
//!
//! The application builds the kernel with [`weft_ir::builder::KernelBuilder`], exactly as a
//! plugin's author does (the SDK's guide, `sdk/GUIDE.md`, describes the IR), and
//! [`Numeric::run_kernel`] runs it on its arrays: validated and math-lowered as a plugin's
//! kernel is at intake, compiled once per distinct kernel (the back end's cache is keyed by
//! the kernel's content), with every access bounds-checked and faults carried to the first
//! read as any task's, in NumPy's words. The task is one point that sees each array whole,
//! so its loops run in order; it fuses with the tasks around it where the fusion rules
//! allow, as any task does. A body with no parallel loop (plain `for` loops, loads and
//! stores, as one writes a loop in Rust) runs once: it is wrapped in a parallel loop of one
//! iteration over a 0-d store of its own (the IR keeps stores inside parallel loops).

use std::sync::Arc;

use weft_ir::{DType, Inst, Kernel, Op, ParallelLoop, Param, Privilege, Scalar};

use super::{Array, Numeric};
use crate::{Error, Result};

impl Numeric {
    /// Runs `kernel` (an application's kernel, built with
    /// [`weft_ir::builder::KernelBuilder`]) as one task of one point: `arrays` are its store
    /// parameters in order, each seen whole (loads and stores index it from 0 along every
    /// dimension), with the privilege its parameter declares; `scalars` its scalar
    /// parameters in order. The kernel is named `app.<its name>` in errors and profiles.
    ///
    /// # Errors
    /// An invalid kernel, a count of arrays or scalars that does not match its parameters,
    /// or an array or scalar of another element type or rank than its parameter's: each
    /// error names the kernel and the argument, and nothing runs. An access out of bounds
    /// while the kernel runs is an error at the first read of what it writes, as any task's.
    #[track_caller]
    pub fn run_kernel(&self, kernel: &Kernel, arrays: &[&Array], scalars: &[Scalar]) -> Result<()> {
        let _site = self.site_guard(std::panic::Location::caller());
        let name = match kernel.name.strip_prefix("app.") {
            Some(_) => kernel.name.clone(),
            None => format!("app.{}", kernel.name),
        };
        let usage = |message: String| Error::Usage(format!("run_kernel `{name}`: {message}"));
        let stores = Param::stores(&kernel.params);
        let scalar_types: Vec<_> = kernel
            .params
            .iter()
            .filter_map(|p| match p {
                Param::Scalar { dtype } => Some(*dtype),
                Param::Store { .. } => None,
            })
            .collect();
        let first_scalar = kernel
            .params
            .iter()
            .position(|p| matches!(p, Param::Scalar { .. }));
        if first_scalar.is_some_and(|i| i < stores.len()) {
            return Err(usage(
                "declare the kernel's store parameters before its scalar parameters".into(),
            ));
        }
        if stores.len() != arrays.len() || scalar_types.len() != scalars.len() {
            return Err(usage(format!(
                "the kernel takes {} arrays and {} scalars, given {} and {}",
                stores.len(),
                scalar_types.len(),
                arrays.len(),
                scalars.len()
            )));
        }
        let mut bound = Vec::with_capacity(arrays.len());
        for (i, (array, &(dtype, rank, privilege))) in arrays.iter().zip(&stores).enumerate() {
            let (got, shape) = (array.dtype()?, array.shape()?);
            if got != dtype || shape.len() != rank as usize {
                return Err(usage(format!(
                    "array {i} is {} of shape {}; the kernel's store parameter {i} wants {} of \
                     rank {rank}",
                    got.name(),
                    super::shape_text(&shape),
                    dtype.name()
                )));
            }
            bound.push((array.handle()?, privilege));
        }
        for (i, (s, &dtype)) in scalars.iter().zip(&scalar_types).enumerate() {
            if s.dtype() != dtype {
                return Err(usage(format!(
                    "scalar {i} is {}; the kernel's scalar parameter {i} wants {}",
                    s.dtype().name(),
                    dtype.name()
                )));
            }
        }
        // The one-iteration domain of a body with no parallel loop, alive until submitted.
        let wrapped = as_one_point(kernel);
        let domain = wrapped.as_ref().map(|_| self.zeros(&[], DType::Bool));
        if let Some(domain) = &domain {
            bound.push((domain.handle()?, Privilege::Read));
        }
        let entry = weft_runtime::KernelEntry::new(&name, wrapped.as_ref().unwrap_or(kernel))?;
        self.runtime(|rt| rt.submit_application_task(Arc::new(entry), &bound, scalars.to_vec()))
    }
}

/// `kernel` with its body inside a parallel loop of one iteration over a new 0-d store
/// parameter (the last store), where the body holds no parallel loop at its top level;
/// `None` where it holds one (the kernel runs as written).
fn as_one_point(kernel: &Kernel) -> Option<Kernel> {
    if kernel
        .body
        .iter()
        .any(|inst| matches!(inst.op, Op::Parallel(_)))
    {
        return None;
    }
    // After the last store parameter (stores come first: checked by the caller), so the
    // scalar parameters move up by one.
    let mut wrapped = kernel.clone();
    let stores = Param::stores(&wrapped.params).len();
    let over = u32::try_from(stores).ok()?;
    wrapped.params.insert(
        stores,
        Param::Store {
            dtype: DType::Bool,
            rank: 0,
            privilege: Privilege::Read,
        },
    );
    shift_scalar_params(&mut wrapped.body, over);
    let body = std::mem::take(&mut wrapped.body);
    wrapped.body = vec![Inst {
        results: Vec::new(),
        op: Op::Parallel(ParallelLoop {
            over,
            indices: Vec::new(),
            body,
        }),
    }];
    Some(wrapped)
}

/// Every read of a scalar parameter at `from` or later in `body` reads the next one.
fn shift_scalar_params(body: &mut [Inst], from: u32) {
    for inst in body {
        match &mut inst.op {
            Op::Param(index) if *index >= from => *index += 1,
            Op::For(l) => shift_scalar_params(&mut l.body, from),
            Op::Parallel(p) => shift_scalar_params(&mut p.body, from),
            _ => {}
        }
    }
}
