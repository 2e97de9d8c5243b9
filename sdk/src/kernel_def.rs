//! Kernels defined once: [`KernelDef`] gives a kernel's key, its parameters and its body in
//! one place; [`Task::of`](crate::Task::of) submits a task for it (the key comes from the
//! definition, and the arguments are checked against the parameters before the host sees
//! them); [`body_of`] answers the host's `kernel-body` request from a list of definitions.

use weft_ir::{Kernel, Param};

use crate::KernelBuilder;

/// A kernel, defined once. The definition's fields are what its body depends on (a rank, a
/// dtype); [`KernelDef::key`] writes them into the key and [`KernelDef::from_key`] reads them
/// back, so the host's request for a body by key finds the same definition.
///
/// ```
/// use weft_sdk::ir::{DType, Privilege};
/// use weft_sdk::{KernelBuilder, KernelDef};
///
/// /// `out = a * factor`, element-wise, over `rank` dimensions.
/// struct Scale { rank: u32 }
///
/// impl KernelDef for Scale {
///     fn key(&self) -> String {
///         format!("scale.r{}", self.rank)
///     }
///     fn from_key(key: &str) -> Option<Scale> {
///         Some(Scale { rank: key.strip_prefix("scale.r")?.parse().ok()? })
///     }
///     fn define(&self, k: &mut KernelBuilder) {
///         let a = k.store(DType::F64, self.rank, Privilege::Read);
///         let out = k.store(DType::F64, self.rank, Privilege::Write);
///         let factor = k.scalar(DType::F64);
///         k.body().parallel(out, |b, i| {
///             let x = b.load(a, i);
///             let y = b.mul(x, factor);
///             b.store(out, i, y);
///         });
///     }
/// }
///
/// let kernel = Scale { rank: 2 }.kernel().unwrap();
/// assert_eq!(kernel.name, "scale.r2");
/// assert!(weft_sdk::body_of::<(Scale,)>("scale.r2").is_ok());
/// assert!(weft_sdk::body_of::<(Scale,)>("scale.x").is_err());
/// ```
pub trait KernelDef: Sized {
    /// The key that names this kernel (it must determine the body).
    fn key(&self) -> String;
    /// The definition a key names, if it is one of this kind's keys.
    fn from_key(key: &str) -> Option<Self>;
    /// Declares the parameters (stores, then scalars, in the order tasks pass them) and
    /// builds the body.
    fn define(&self, k: &mut KernelBuilder);

    /// The kernel, built and validated.
    fn kernel(&self) -> Result<Kernel, String> {
        let key = self.key();
        let mut k = KernelBuilder::new(key.clone());
        self.define(&mut k);
        k.finish_validated()
            .map_err(|e| format!("kernel `{key}`: {e}"))
    }

    /// The kernel's parameters, in order.
    fn params(&self) -> Result<Vec<Param>, String> {
        Ok(self.kernel()?.params)
    }
}

/// A list of kernel definitions (a tuple of [`KernelDef`] types) that [`body_of`] searches.
pub trait KernelSet {
    /// The body of `key` from the first definition that reads it, if any does.
    fn find(key: &str) -> Option<Result<Kernel, String>>;
}

macro_rules! kernel_set {
    ($($t:ident),+) => {
        impl<$($t: KernelDef),+> KernelSet for ($($t,)+) {
            fn find(key: &str) -> Option<Result<Kernel, String>> {
                $(
                    if let Some(def) = $t::from_key(key) {
                        return Some(def.kernel());
                    }
                )+
                None
            }
        }
    };
}

kernel_set!(A);
kernel_set!(A, B);
kernel_set!(A, B, C);
kernel_set!(A, B, C, D);
kernel_set!(A, B, C, D, E);
kernel_set!(A, B, C, D, E, F);
kernel_set!(A, B, C, D, E, F, G);
kernel_set!(A, B, C, D, E, F, G, H);

/// The body the host asks for by `key`, from the definitions `S` (a tuple of [`KernelDef`]
/// types): what [`plugin!`](crate::plugin)'s `kernels:` takes, as `weft_sdk::body_of::<(Scale,
/// Total)>`.
pub fn body_of<S: KernelSet>(key: &str) -> Result<Kernel, String> {
    S::find(key).unwrap_or_else(|| Err(format!("unknown kernel key `{key}`")))
}
