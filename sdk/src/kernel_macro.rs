//! [`kernel!`](crate::kernel): a kernel declared once (its key's fields, its stores with their
//! dtypes, ranks and privileges, its scalars with their Rust types, and its body), from which
//! the macro writes the [`KernelDef`](crate::KernelDef) the host's `kernel-body` request reads
//! and a typed `task` method that submits it. The task's arguments are the declaration's, in
//! its order and with its types, so a task that passes too few stores, too many scalars or a
//! scalar of the wrong type does not compile; privileges are not repeated at all. What Rust
//! cannot see (a store's dtype and rank, which the host knows only at run time) is checked by
//! [`Task::submit`](crate::Task::submit) before the host sees the task.

use crate::Scalar;
use weft_ir::DType;

/// A Rust type a kernel's scalar parameter can have: its IR dtype and its WIT value.
pub trait KernelScalar {
    /// The parameter's dtype.
    const DTYPE: DType;
    /// The value a task passes.
    fn into_scalar(self) -> Scalar;
}

macro_rules! kernel_scalar {
    ($($t:ty => $dtype:ident),*) => {
        $(
            impl KernelScalar for $t {
                const DTYPE: DType = DType::$dtype;
                fn into_scalar(self) -> Scalar {
                    Scalar::$dtype(self)
                }
            }
        )*
    };
}

kernel_scalar!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, bool => Bool);

/// A type a [`kernel!`](crate::kernel)'s field can have: its value is written into the
/// kernel's key with `Display` and read back with `FromStr`, so every type with both is one
/// (`u32`, `i64`, `bool`, [`ir::DType`](crate::ir::DType), an enum of your own). Its text must
/// not contain a `.`, which separates the key's fields, and must parse back to the same value.
///
/// A field of another type is an error at that field (the test checks that it is this error,
/// E0277, an unsatisfied trait bound):
///
/// ```compile_fail,E0277
/// /// Not `FromStr`, so it cannot be read back from a key.
/// #[derive(Clone, Debug, PartialEq)]
/// pub struct Mode;
///
/// impl std::fmt::Display for Mode {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("mode")
///     }
/// }
///
/// weft_sdk::kernel! {
///     struct Smooth { rank: u32, mode: Mode }
///     stores { a: (F64, rank, Read), out: (F64, rank, Write) }
///     body(k) {}
/// }
/// ```
///
/// The compiler's error points at `Mode` in `mode: Mode`: "`Mode` cannot be a field of a
/// `kernel!`: its value goes into the kernel's key", with "the trait `FromStr` is not
/// implemented for `Mode`" below it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a field of a `kernel!`: its value goes into the kernel's key",
    label = "a field's type needs `Display` (to write the key) and `FromStr` (to read it back)",
    note = "numbers, `bool` and `weft_sdk::ir::DType` have both; implement them for a type of \
            your own (its text must not contain `.`)"
)]
pub trait KeyField: Sized {
    /// The field's value as written in the key.
    fn to_key(&self) -> String;
    /// The value `text` (from a key) stands for, if any.
    fn from_key(text: &str) -> Option<Self>;
}

impl<T: std::fmt::Display + std::str::FromStr> KeyField for T {
    fn to_key(&self) -> String {
        self.to_string()
    }

    fn from_key(text: &str) -> Option<T> {
        text.parse().ok()
    }
}

/// What the code [`kernel!`](crate::kernel) writes calls; not for direct use.
#[doc(hidden)]
pub mod private {
    /// `name` in snake case, then `.field=value` for each field: `ZScore { rank: 1 }` is
    /// `z_score.rank=1`.
    pub fn key(name: &str, fields: &[(&str, String)]) -> String {
        let mut key = snake(name);
        for (field, value) in fields {
            key.push_str(&format!(".{field}={value}"));
        }
        key
    }

    /// The values of `fields` in a key [`key`] wrote for a kernel named `name`, if it is one.
    pub fn values<'k>(name: &str, key: &'k str, fields: &[&str]) -> Option<Vec<&'k str>> {
        let mut parts = key.split('.');
        if parts.next()? != snake(name) {
            return None;
        }
        let mut values = Vec::with_capacity(fields.len());
        for field in fields {
            let (f, value) = parts.next()?.split_once('=')?;
            if f != *field {
                return None;
            }
            values.push(value);
        }
        parts.next().is_none().then_some(values)
    }

    fn snake(name: &str) -> String {
        let mut out = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// Declares a kernel once and writes its [`KernelDef`](crate::KernelDef) and a typed `task`
/// method that submits it.
///
/// - the struct's fields are what the body depends on (a rank, a dtype); they make up the key
///   (`scale.rank=2`), so their values must print without a `.` and parse back (see
///   [`KeyField`]: numbers, `bool` and [`ir::DType`](crate::ir::DType) do, and a field of
///   another type is a compile error at that field);
/// - `stores` lists the store parameters as `name: (dtype, rank, privilege)`, where the three
///   are expressions that may use the fields and name `F64`, `Read`, `Reduce(Sum)` and the
///   other variants of [`ir::DType`](crate::ir::DType), [`ir::Privilege`](crate::ir::Privilege)
///   and [`ir::ReduceOp`](crate::ir::ReduceOp) bare;
/// - `scalars` (optional) lists the scalar parameters as `name: RustType` (`f64`, `f32`,
///   `i64`, `i32`, `bool`; see [`KernelScalar`]);
/// - `body(k) { .. }` builds the body with the [`KernelBuilder`](crate::KernelBuilder) `k`,
///   where each store and scalar is a local of its name, and so is each field; for the common
///   body of one parallel loop, `parallel(store, |b, i| { .. })` is short for
///   `body(k) { k.body().parallel(store, |b, i| { .. }); }`.
///
/// The written methods are `task(&self, launch, store.., scalar..)`, which returns a
/// [`Task`](crate::Task) to [`submit`](crate::Task::submit), and `submit` with the same
/// arguments, which submits it: each store as `(&Store, Partition)`, each scalar as its Rust
/// type, in the declaration's order.
///
/// ```
/// use weft_sdk::KernelDef;
///
/// weft_sdk::kernel! {
///     /// `out = a * factor`, element-wise, over `rank` dimensions.
///     pub struct Scale { rank: u32 }
///     stores { a: (F64, rank, Read), out: (F64, rank, Write) }
///     scalars { factor: f64 }
///     parallel(out, |b, i| {
///         let x = b.load(a, i);
///         let y = b.mul(x, factor);
///         b.store(out, i, y);
///     })
/// }
///
/// weft_sdk::kernel! {
///     /// `out += a[i]` for every point `i` of `a` (`rank` dimensions), into a 0-d `out`.
///     struct Total { rank: u32 }
///     stores { a: (F64, rank, Read), out: (F64, 0, Reduce(Sum)) }
///     body(k) {
///         k.body().parallel(a, |b, i| {
///             let x = b.load(a, i);
///             b.reduce(out, &[], x);
///         });
///     }
/// }
///
/// assert_eq!(Total { rank: 3 }.key(), "total.rank=3");
/// assert_eq!(Scale { rank: 2 }.key(), "scale.rank=2");
/// assert_eq!(Scale::from_key("scale.rank=2"), Some(Scale { rank: 2 }));
/// let kernel = Scale { rank: 2 }.kernel().unwrap();
/// assert_eq!(kernel.params.len(), 3);
/// assert!(weft_sdk::body_of::<(Scale, Total)>("total.rank=1").is_ok());
/// assert!(weft_sdk::body_of::<(Scale, Total)>("total.rank=x").is_err());
/// ```
///
/// A field may be a dtype, which makes one declaration generic over element types: the
/// stores' dtypes and the body's constants use it (a scalar's dtype is its Rust type's, so
/// take an `f64` and `b.cast(dtype, ..)` it where the kernel needs the dtype).
///
/// ```
/// use weft_sdk::KernelDef;
/// use weft_sdk::ir::DType;
///
/// weft_sdk::kernel! {
///     /// `out = a * factor + 1`, element-wise, for a float `dtype`.
///     struct ScaleUp { dtype: DType, rank: u32 }
///     stores { a: (dtype, rank, Read), out: (dtype, rank, Write) }
///     scalars { factor: f64 }
///     parallel(out, |b, i| {
///         let y = b.mul(b.load(a, i), b.cast(dtype, factor));
///         b.store(out, i, b.add(y, b.const_of(dtype, 1.0)));
///     })
/// }
///
/// let f32s = ScaleUp { dtype: DType::F32, rank: 2 };
/// assert_eq!(f32s.key(), "scale_up.dtype=f32.rank=2");
/// assert_eq!(ScaleUp::from_key("scale_up.dtype=f32.rank=2"), Some(f32s.clone()));
/// assert_eq!(ScaleUp::from_key("scale_up.dtype=f16.rank=2"), None);
/// // Each dtype is its own kernel, with its own store parameters.
/// for dtype in [DType::F32, DType::F64] {
///     let params = ScaleUp { dtype, rank: 1 }.params().unwrap();
///     assert_eq!(weft_sdk::ir::Param::stores(&params)[0].0, dtype);
/// }
/// ```
///
/// A task with the wrong arguments does not compile:
///
/// ```compile_fail
/// # weft_sdk::kernel! {
/// #     pub struct Scale { rank: u32 }
/// #     stores { a: (F64, rank, Read), out: (F64, rank, Write) }
/// #     scalars { factor: f64 }
/// #     body(k) {}
/// # }
/// # fn f(a: &weft_sdk::Store, out: &weft_sdk::Store) {
/// let launch = weft_sdk::Launch::preferred(&[4]);
/// // `factor` is an f64, not an i64.
/// let task = Scale { rank: 1 }.task(&launch, (a, launch.tiled()), (out, launch.tiled()), 2i64);
/// # }
/// ```
///
/// ```compile_fail
/// # weft_sdk::kernel! {
/// #     pub struct Scale { rank: u32 }
/// #     stores { a: (F64, rank, Read), out: (F64, rank, Write) }
/// #     scalars { factor: f64 }
/// #     body(k) {}
/// # }
/// # fn f(a: &weft_sdk::Store) {
/// let launch = weft_sdk::Launch::preferred(&[4]);
/// // The output store is missing.
/// let task = Scale { rank: 1 }.task(&launch, (a, launch.tiled()), 2.0);
/// # }
/// ```
#[macro_export]
macro_rules! kernel {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($field:ident : $fty:ty),* $(,)? }
        stores { $($store:ident : ($dtype:expr, $rank:expr, $privilege:expr)),+ $(,)? }
        $(scalars { $($scalar:ident : $sty:ty),* $(,)? })?
        parallel($over:ident, |$b:ident, $i:ident| $body:expr)
    ) => {
        $crate::kernel! {
            $(#[$meta])*
            $vis struct $name { $($field: $fty),* }
            stores { $($store: ($dtype, $rank, $privilege)),+ }
            $(scalars { $($scalar: $sty),* })?
            body(k) {
                k.body().parallel($over, |$b, $i| {
                    $body;
                });
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($field:ident : $fty:ty),* $(,)? }
        stores { $($store:ident : ($dtype:expr, $rank:expr, $privilege:expr)),+ $(,)? }
        $(scalars { $($scalar:ident : $sty:ty),* $(,)? })?
        body($k:ident) $body:block
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name {
            $(
                #[allow(missing_docs)]
                pub $field: $fty,
            )*
        }

        impl $crate::KernelDef for $name {
            fn key(&self) -> ::std::string::String {
                $crate::__kernel_private::key(
                    stringify!($name),
                    &[$((stringify!($field), <$fty as $crate::KeyField>::to_key(&self.$field))),*],
                )
            }

            fn from_key(key: &str) -> ::std::option::Option<Self> {
                #[allow(unused_mut, unused_variables)]
                let mut values = $crate::__kernel_private::values(
                    stringify!($name),
                    key,
                    &[$(stringify!($field)),*],
                )?
                .into_iter();
                ::std::option::Option::Some($name {
                    $($field: <$fty as $crate::KeyField>::from_key(values.next()?)?,)*
                })
            }

            #[allow(unused_variables, unused_imports)]
            fn define(&self, $k: &mut $crate::KernelBuilder) {
                use $crate::ir::DType::*;
                use $crate::ir::Privilege::*;
                use $crate::ir::ReduceOp::*;
                $(let $field = ::std::clone::Clone::clone(&self.$field);)*
                $(let $store = $k.store($dtype, $rank, $privilege);)+
                $($(let $scalar = $k.scalar(<$sty as $crate::KernelScalar>::DTYPE);)*)?
                $body
            }
        }

        impl $name {
            /// A task of this kernel over `launch`: each store with its partition, then each
            /// scalar, in the kernel's order. [`submit`]($crate::Task::submit) it.
            #[allow(clippy::too_many_arguments, dead_code)]
            $vis fn task<'a>(
                &self,
                launch: &$crate::Launch,
                $($store: (&'a $crate::Store, $crate::Partition),)+
                $($($scalar: $sty,)*)?
            ) -> $crate::Task<'a> {
                let task = $crate::Task::of(self, launch);
                $(let task = task.declared_arg($store.0, $store.1);)+
                $($(let task = task.scalar($crate::KernelScalar::into_scalar($scalar));)*)?
                task
            }

            /// Submits a task of this kernel over `launch` (see `task`).
            #[allow(clippy::too_many_arguments, dead_code)]
            $vis fn submit<'a>(
                &self,
                launch: &$crate::Launch,
                $($store: (&'a $crate::Store, $crate::Partition),)+
                $($($scalar: $sty,)*)?
            ) -> ::std::result::Result<(), $crate::Error> {
                self.task(launch, $($store,)+ $($($scalar,)*)?).submit()
            }
        }
    };
}
