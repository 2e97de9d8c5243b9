//! Composition: the kernels of a fused task's parts, concatenated in program order.
//!
//! The host fuses a prefix of index tasks into one task. Each task's kernel has one parameter
//! per task argument (stores) and per task scalar; the fused task has deduplicated arguments
//! and merged privileges. [`compose`] builds the fused task's kernel: it maps each part's
//! parameters to the fused ones, renames every value to a fresh id (so the parts' values never
//! collide) and appends the parts' bodies one after another. Nothing is reordered: the
//! composed kernel does exactly what running the parts one after another does, and the other
//! passes (see [`super::pipeline::optimize`]) make it faster.
//!
//! ```
//! use weft_ir::passes::compose::{Part, compose};
//! use weft_ir::{DType, Param, Privilege, text};
//!
//! let scale = text::parse(
//!     "kernel @scale(%x: store<f64, 1, read>, %y: store<f64, 1, write>) {
//!        parallel %y (%i) { %v = load %x[%i]  %w = add %v, %v  store %y[%i], %w }
//!      }",
//! )
//! .unwrap();
//! let store = |privilege| Param::Store { dtype: DType::F64, rank: 1, privilege };
//! // y = 2x, then z = 2y: y is written by the first part and read by the second.
//! let params = vec![store(Privilege::Read), store(Privilege::ReadWrite), store(Privilege::Write)];
//! let parts = [
//!     Part { kernel: &scale, params: vec![0, 1] },
//!     Part { kernel: &scale, params: vec![1, 2] },
//! ];
//! let fused = compose("fused", params, &parts).unwrap();
//! weft_ir::validate(&fused).unwrap();
//! assert_eq!(fused.body.len(), 2);
//! ```

use crate::passes::util::{AccessKind, for_each_access, rename};
use crate::text::{param_type, privilege_name};
use crate::validate::MAX_VALUE_ID;
use crate::{Kernel, Param, Privilege, ValueId, validate, visit_defs};

/// One part of a fused kernel: a task's kernel and where its parameters go.
#[derive(Clone, Debug)]
pub struct Part<'a> {
    /// The task's kernel.
    pub kernel: &'a Kernel,
    /// For each of the kernel's parameters (stores and scalars), the index of the fused
    /// parameter it becomes.
    pub params: Vec<u32>,
}

/// Why [`compose`] refused its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    /// A part's kernel does not validate.
    #[error("part {part} (`{kernel}`) is invalid: {message}")]
    InvalidPart {
        /// Which part (0-based).
        part: usize,
        /// Its kernel's name.
        kernel: String,
        /// The validation error.
        message: String,
    },
    /// A part maps a different number of parameters than its kernel has.
    #[error("part {part} (`{kernel}`) has {params} parameters but maps {mapped}")]
    ParamCount {
        /// Which part.
        part: usize,
        /// Its kernel's name.
        kernel: String,
        /// How many parameters the kernel has.
        params: usize,
        /// How many the part maps.
        mapped: usize,
    },
    /// A part maps a parameter to a fused parameter that does not exist.
    #[error(
        "part {part}: parameter {param} maps to fused parameter {fused}, but there are only \
         {count} fused parameters"
    )]
    OutOfRange {
        /// Which part.
        part: usize,
        /// The part's parameter.
        param: u32,
        /// The fused parameter it maps to.
        fused: u32,
        /// The number of fused parameters.
        count: usize,
    },
    /// A part's parameter and its fused parameter differ in kind, element type or rank.
    #[error(
        "part {part}: parameter {param} is {part_type} but fused parameter {fused} is {fused_type}"
    )]
    Mismatch {
        /// Which part.
        part: usize,
        /// The part's parameter.
        param: u32,
        /// Its type in the text form.
        part_type: String,
        /// The fused parameter.
        fused: u32,
        /// The fused parameter's type in the text form.
        fused_type: String,
    },
    /// A part does something to a store that the fused parameter's privilege forbids.
    #[error(
        "part {part}: parameter {param} is {action} but fused parameter {fused} has privilege \
         {privilege}"
    )]
    Privilege {
        /// Which part.
        part: usize,
        /// The part's parameter.
        param: u32,
        /// What the part does (`read`, `written`, `reduced with sum`...).
        action: String,
        /// The fused parameter.
        fused: u32,
        /// The fused parameter's privilege in the text form.
        privilege: String,
    },
    /// The parts define more values than a kernel may hold.
    #[error("the composed kernel would define {count} values, more than the limit {MAX_VALUE_ID}")]
    TooManyValues {
        /// How many values the parts define together.
        count: u64,
    },
}

/// Builds the kernel `name` with parameters `params` whose body is the bodies of `parts`, in
/// order.
///
/// Each part's parameter `i` becomes fused parameter `part.params[i]`, and its values get
/// fresh ids, numbered in definition order across the parts (so the result is already
/// numbered as [`crate::renumber`] would number it).
///
/// # Errors
/// - a part's kernel is invalid ([`ComposeError::InvalidPart`]);
/// - a part maps the wrong number of parameters, or to a fused parameter out of range;
/// - a part's parameter and its fused parameter differ in kind (store or scalar), element type
///   or rank ([`ComposeError::Mismatch`]);
/// - a part loads from, stores to or reduces into a store whose fused privilege does not allow
///   it: a load needs a readable fused parameter, a store a writable one, a reduction the
///   privilege `reduce(op)` with the same operator ([`ComposeError::Privilege`]). What counts is
///   what the part's body does, not its declared privilege: a part that declares `readwrite`
///   but only writes may map to a `write` parameter.
///
/// When it succeeds the result is valid.
pub fn compose(
    name: impl Into<String>,
    params: Vec<Param>,
    parts: &[Part<'_>],
) -> Result<Kernel, ComposeError> {
    let mut total: u64 = 0;
    for (index, part) in parts.iter().enumerate() {
        check_part(index, part, &params)?;
        let mut defs = 0u64;
        visit_defs(&part.kernel.body, &mut |_| defs += 1);
        total += defs;
    }
    if total >= u64::from(MAX_VALUE_ID) {
        return Err(ComposeError::TooManyValues { count: total });
    }
    let mut body = Vec::new();
    let mut next = 0u32;
    for part in parts {
        // Number the part's values in definition order, from `next`.
        let bound = part.kernel.value_bound() as usize;
        let mut map: Vec<Option<ValueId>> = vec![None; bound];
        visit_defs(&part.kernel.body, &mut |v| {
            if let Some(slot) = map.get_mut(v.0 as usize) {
                *slot = Some(ValueId(next));
                next += 1;
            }
        });
        let mut value = |v: ValueId| map.get(v.0 as usize).copied().flatten().unwrap_or(v);
        let mut param = |p: u32| part.params.get(p as usize).copied().unwrap_or(p);
        body.extend(rename(&part.kernel.body, &mut value, &mut param));
    }
    Ok(Kernel {
        name: name.into(),
        params,
        body,
    })
}

/// Checks one part against the fused parameters.
fn check_part(index: usize, part: &Part<'_>, fused: &[Param]) -> Result<(), ComposeError> {
    let kernel = part.kernel;
    validate(kernel).map_err(|e| ComposeError::InvalidPart {
        part: index,
        kernel: kernel.name.clone(),
        message: e.message,
    })?;
    if part.params.len() != kernel.params.len() {
        return Err(ComposeError::ParamCount {
            part: index,
            kernel: kernel.name.clone(),
            params: kernel.params.len(),
            mapped: part.params.len(),
        });
    }
    for (i, (&p, &to)) in kernel.params.iter().zip(&part.params).enumerate() {
        let Some(&f) = fused.get(to as usize) else {
            return Err(ComposeError::OutOfRange {
                part: index,
                param: i as u32,
                fused: to,
                count: fused.len(),
            });
        };
        let same = match (p, f) {
            (Param::Scalar { dtype: a }, Param::Scalar { dtype: b }) => a == b,
            (
                Param::Store {
                    dtype: a, rank: ra, ..
                },
                Param::Store {
                    dtype: b, rank: rb, ..
                },
            ) => a == b && ra == rb,
            _ => false,
        };
        if !same {
            return Err(ComposeError::Mismatch {
                part: index,
                param: i as u32,
                part_type: param_type(p),
                fused: to,
                fused_type: param_type(f),
            });
        }
    }
    let mut error = None;
    for_each_access(&kernel.body, false, &mut |a, kind, _| {
        if error.is_some() {
            return;
        }
        let Some(&to) = part.params.get(a.param as usize) else {
            return;
        };
        let Some(&Param::Store { privilege, .. }) = fused.get(to as usize) else {
            return;
        };
        let ok = match kind {
            AccessKind::Load => privilege.can_read(),
            AccessKind::Store => privilege.can_write(),
            AccessKind::Reduce(op) => privilege == Privilege::Reduce(op),
        };
        if !ok {
            let action = match kind {
                AccessKind::Reduce(op) => format!("reduced with {}", op.name()),
                k => k.verb().to_string(),
            };
            error = Some(ComposeError::Privilege {
                part: index,
                param: a.param,
                action,
                fused: to,
                privilege: privilege_name(privilege),
            });
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
