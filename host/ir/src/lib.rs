//! Weft's portable kernel IR.
//!
//! A plugin hands the host the body of every task it submits in this IR. The host validates it,
//! fuses it with the bodies of neighbouring tasks and compiles it for a back end (Cranelift on
//! CPUs, PTX on NVIDIA GPUs).
//!
//! The IR is a structured SSA form:
//! - a [`Kernel`] has parameters ([`Param`]): the task's stores, each with an element type, a
//!   rank and a privilege, and scalars;
//! - its body is a list of instructions ([`Inst`]), each defining zero or more SSA values;
//! - a [`ParallelLoop`] iterates over the point task's sub-store of one store parameter. Its
//!   iterations are independent, so a back end may split them across threads;
//! - a [`ForLoop`] is a sequential loop with bounds computed at run time and loop-carried values;
//! - loads, stores and reductions address a store parameter with one index value per dimension.
//!   Indices are relative to the origin of the point task's sub-store of that parameter, and
//!   every index is checked against that sub-store's extent unless the back end proves it in
//!   bounds, so no IR can make compiled code touch memory outside the stores handed to a task.
//!
//! Values defined in a block are visible in that block after their definition and in every
//! block nested in it after that point (structured dominance).
//!
//! The modules hold, one job each:
//! - [`validate`](mod@validate): the validator and type inference;
//! - [`text`]: the text form, printed and parsed;
//! - [`flat`]: the flat form, with regions by index, that crosses the WIT boundary;
//! - [`builder`]: a builder for plugin authors;
//! - [`passes`]: transformations of kernels (math lowering, kernel fusion, ...);
//! - [`product`]: the canonical dense product kernel, which back ends may run with a tuned
//!   routine;
//! - [`interp`]: a reference interpreter, the yardstick for testing passes;
//! - [`semantics`]: what every back end must keep (limits, integer and float rules, NaNs,
//!   reduction order).
//!
//! `weft-ir` depends on nothing of Weft's and on no back end; every other crate depends on it.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod builder;
pub mod coverage;
pub mod elements;
pub mod flat;
pub mod index;
pub mod interp;
pub mod liveness;
pub mod matvec;
pub mod passes;
pub mod product;
pub mod reduction;
pub mod semantics;
pub mod shape;
pub mod text;
pub mod validate;

pub use builder::KernelBuilder;
pub use validate::{ValidKernel, ValidateError, renumber, validate};

/// The element type of a store, or the type of an SSA value.
///
/// Index arithmetic uses [`DType::I64`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer; also the type of indices and extents.
    I64,
    /// Boolean; stored as one byte (0 or 1).
    Bool,
    /// Unsigned 8-bit integer, a *storage* type: loading one gives its value zero-extended
    /// to an [`DType::I64`] value, and storing an `i64` value keeps its low 8 bits. No SSA
    /// value, constant or scalar parameter has an unsigned type; the arithmetic of unsigned
    /// integers (wrapping at the width, unsigned division and comparison) is written by the
    /// plugin in `i64` operations (see `docs/design.md`, "Unsigned integers").
    U8,
    /// Unsigned 16-bit integer, a storage type like [`DType::U8`].
    U16,
    /// Unsigned 32-bit integer, a storage type like [`DType::U8`].
    U32,
    /// Unsigned 64-bit integer, a storage type: loading one gives an `i64` value with the
    /// same 64 bits (values of 2^63 and more read as negative), and storing keeps all 64.
    U64,
}

impl DType {
    /// Every element type, in a fixed order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The types an SSA value may have (every type but the unsigned storage types).
    pub const VALUES: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];

    /// The unsigned storage types, narrowest first.
    pub const UNSIGNED: [DType; 4] = [DType::U8, DType::U16, DType::U32, DType::U64];

    /// Size of one element in bytes, as stored.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::Bool | DType::U8 => 1,
            DType::U16 => 2,
        }
    }

    /// Whether this is one of the unsigned storage types ([`DType::U8`] .. [`DType::U64`]).
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// The type of the value that loading an element of this type gives (and that storing
    /// one takes): [`DType::I64`] for the unsigned storage types, the type itself otherwise.
    pub fn value_type(self) -> DType {
        if self.is_unsigned() { DType::I64 } else { self }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Whether this is a signed integer type.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The name used in the text form (`f32`, `f64`, `i32`, `i64`, `bool`, `u8`, `u16`,
    /// `u32`, `u64`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }

    /// Parses a name printed by [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses what [`Display`](std::fmt::Display) prints ([`DType::name`]), so a dtype
/// round-trips through text (a kernel key's field, for one):
///
/// ```
/// use weft_ir::DType;
///
/// for dtype in DType::ALL {
///     assert_eq!(dtype.to_string().parse::<DType>(), Ok(dtype));
/// }
/// let e = "f16".parse::<DType>().unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "`f16` is not a dtype (f32, f64, i32, i64, bool, u8, u16, u32 or u64)"
/// );
/// ```
impl std::str::FromStr for DType {
    type Err = UnknownDType;

    fn from_str(s: &str) -> Result<DType, UnknownDType> {
        DType::from_name(s).ok_or_else(|| UnknownDType(s.to_string()))
    }
}

/// The error of parsing a [`DType`] from text that names none (it holds the text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDType(pub String);

impl std::fmt::Display for UnknownDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is not a dtype (f32, f64, i32, i64, bool, u8, u16, u32 or u64)",
            self.0
        )
    }
}

impl std::error::Error for UnknownDType {}

/// A constant of one of the [`DType`]s.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// A 32-bit integer.
    I32(i32),
    /// A 64-bit integer.
    I64(i64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    /// The type of this constant.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// The constant's bits, zero-extended to 64: the form used for hashing, equality and
    /// passing scalars to compiled code.
    pub fn to_bits(self) -> u64 {
        match self {
            Scalar::F32(v) => u64::from(v.to_bits()),
            Scalar::F64(v) => v.to_bits(),
            Scalar::I32(v) => u64::from(v as u32),
            Scalar::I64(v) => v as u64,
            Scalar::Bool(v) => u64::from(v),
        }
    }

    /// Rebuilds a constant of type `dtype` from [`Scalar::to_bits`]. An unsigned storage
    /// type gives the `i64` value that loading an element with those bits gives (the low
    /// bits of the type's width, zero-extended).
    pub fn from_bits(dtype: DType, bits: u64) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
            DType::F64 => Scalar::F64(f64::from_bits(bits)),
            DType::I32 => Scalar::I32(bits as u32 as i32),
            DType::I64 | DType::U64 => Scalar::I64(bits as i64),
            DType::Bool => Scalar::Bool(bits != 0),
            DType::U8 => Scalar::I64(i64::from(bits as u8)),
            DType::U16 => Scalar::I64(i64::from(bits as u16)),
            DType::U32 => Scalar::I64(i64::from(bits as u32)),
        }
    }

    /// The value converted to f64 (for references and printing).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F32(v) => f64::from(v),
            Scalar::F64(v) => v,
            Scalar::I32(v) => f64::from(v),
            Scalar::I64(v) => v as f64,
            Scalar::Bool(v) => f64::from(u8::from(v)),
        }
    }
}

/// Constants are equal when they have the same type and the same bits (so `NaN == NaN` and
/// `0.0 != -0.0`): the equality that memoization needs.
impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype() && self.to_bits() == other.to_bits()
    }
}

impl Eq for Scalar {}

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.to_bits().hash(state);
    }
}

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Addition; identity 0.
    Sum,
    /// Multiplication; identity 1.
    Prod,
    /// Minimum; identity +inf (or the type's maximum).
    Min,
    /// Maximum; identity -inf (or the type's minimum).
    Max,
}

impl ReduceOp {
    /// Every operator, in a fixed order.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }

    /// Parses a name printed by [`ReduceOp::name`].
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The identity of this operator for `dtype`.
    pub fn identity(self, dtype: DType) -> Scalar {
        match (self, dtype) {
            (ReduceOp::Sum, d) => Scalar::from_bits(d, zero_bits(d)),
            (ReduceOp::Prod, DType::F32) => Scalar::F32(1.0),
            (ReduceOp::Prod, DType::F64) => Scalar::F64(1.0),
            (ReduceOp::Prod, DType::I32) => Scalar::I32(1),
            (ReduceOp::Prod, DType::I64) => Scalar::I64(1),
            (ReduceOp::Prod, DType::Bool) => Scalar::Bool(true),
            (ReduceOp::Min, DType::F32) => Scalar::F32(f32::INFINITY),
            (ReduceOp::Min, DType::F64) => Scalar::F64(f64::INFINITY),
            (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
            (ReduceOp::Min, DType::I64) => Scalar::I64(i64::MAX),
            (ReduceOp::Min, DType::Bool) => Scalar::Bool(true),
            (ReduceOp::Max, DType::F32) => Scalar::F32(f32::NEG_INFINITY),
            (ReduceOp::Max, DType::F64) => Scalar::F64(f64::NEG_INFINITY),
            (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
            (ReduceOp::Max, DType::I64) => Scalar::I64(i64::MIN),
            (ReduceOp::Max, DType::Bool) => Scalar::Bool(false),
            // The unsigned storage types take no reductions (validation refuses them); their
            // values are `i64`s, and these are the identities of that arithmetic.
            (ReduceOp::Prod, d) if d.is_unsigned() => Scalar::I64(1),
            (ReduceOp::Min, d) if d.is_unsigned() => Scalar::from_bits(d, u64::MAX),
            (ReduceOp::Max, d) if d.is_unsigned() => Scalar::I64(0),
            (_, d) => Scalar::from_bits(d, 0),
        }
    }
}

fn zero_bits(_d: DType) -> u64 {
    0
}

/// What a task may do to a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Privilege {
    /// Loads only.
    Read,
    /// Stores only; the previous contents are not read (they may be discarded).
    Write,
    /// Loads and stores.
    ReadWrite,
    /// Reductions with one operator, folded into the existing contents.
    Reduce(ReduceOp),
}

impl Privilege {
    /// Whether loads are allowed.
    pub fn can_read(self) -> bool {
        matches!(self, Privilege::Read | Privilege::ReadWrite)
    }

    /// Whether stores are allowed.
    pub fn can_write(self) -> bool {
        matches!(self, Privilege::Write | Privilege::ReadWrite)
    }

    /// Whether the store's contents may change.
    pub fn mutates(self) -> bool {
        !matches!(self, Privilege::Read)
    }
}

/// A kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// A store: the point task's sub-store of one task argument.
    Store {
        /// Element type.
        dtype: DType,
        /// Number of dimensions (0 for a single element).
        rank: u32,
        /// What the kernel may do to it.
        privilege: Privilege,
    },
    /// A scalar argument of the task.
    Scalar {
        /// Its type.
        dtype: DType,
    },
}

impl Param {
    /// The store parameters of `params`, in order: (dtype, rank, privilege).
    pub fn stores(params: &[Param]) -> Vec<(DType, u32, Privilege)> {
        Param::store_iter(params).collect()
    }

    /// [`Param::stores`] without collecting them.
    pub fn store_iter(
        params: &[Param],
    ) -> impl Iterator<Item = (DType, u32, Privilege)> + Clone + '_ {
        params.iter().filter_map(|p| match *p {
            Param::Store {
                dtype,
                rank,
                privilege,
            } => Some((dtype, rank, privilege)),
            Param::Scalar { .. } => None,
        })
    }

    /// The scalar parameters of `params`, in order: their dtypes.
    pub fn scalars(params: &[Param]) -> Vec<DType> {
        Param::scalar_iter(params).collect()
    }

    /// [`Param::scalars`] without collecting them.
    pub fn scalar_iter(params: &[Param]) -> impl Iterator<Item = DType> + Clone + '_ {
        params.iter().filter_map(|p| match *p {
            Param::Scalar { dtype } => Some(dtype),
            Param::Store { .. } => None,
        })
    }
}

/// An SSA value, unique within its kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl std::fmt::Display for ValueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A binary arithmetic or logical operator; both operands have the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b` (integers wrap).
    Add,
    /// `a - b` (integers wrap).
    Sub,
    /// `a * b` (integers wrap).
    Mul,
    /// `a / b`; integer division truncates, and dividing by zero gives 0.
    Div,
    /// Remainder with the sign of `a`; an integer remainder by zero gives 0, a float one
    /// follows C's `fmod` (NaN).
    Rem,
    /// The smaller operand (floats: NaN if either is NaN).
    Min,
    /// The larger operand (floats: NaN if either is NaN).
    Max,
    /// `a` to the power `b` (floats only).
    Pow,
    /// The angle of the point `(b, a)`: `atan2(a, b)`, in `[-π, π]` (floats only; C99's
    /// special cases).
    Atan2,
    /// Bitwise and (integers and bools).
    And,
    /// Bitwise or (integers and bools).
    Or,
    /// Bitwise exclusive or (integers and bools).
    Xor,
    /// `a << b`: shift left (integers only). The shift amount `b` is taken modulo the bit
    /// width (32 or 64), as Cranelift's `ishl` and x86's `shl` do, so `1 << 65 == 2` for `i64`
    /// and a negative amount shifts by its low bits. Bits shifted out are lost.
    Shl,
    /// `a >> b`: logical shift right (integers only; zeros come in at the top, whatever the
    /// sign of `a`). The shift amount is taken modulo the bit width, as for [`BinaryOp::Shl`].
    Shr,
}

impl BinaryOp {
    /// Every operator, in a fixed order.
    pub const ALL: [BinaryOp; 14] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::Pow,
        BinaryOp::Atan2,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::Pow => "pow",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
        }
    }

    /// Parses a name printed by [`BinaryOp::name`].
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// A unary operator; the result has the operand's type (`not` needs an integer or bool;
/// the math functions need a float).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-a`.
    Neg,
    /// `|a|`.
    Abs,
    /// Square root.
    Sqrt,
    /// `e^a`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// The error function.
    Erf,
    /// Inverse sine, in `[-π/2, π/2]`.
    Asin,
    /// Inverse cosine, in `[0, π]`.
    Acos,
    /// Inverse tangent, in `[-π/2, π/2]`.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine (on `[1, inf]`).
    Acosh,
    /// Inverse hyperbolic tangent (on `[-1, 1]`).
    Atanh,
    /// Round toward minus infinity.
    Floor,
    /// Round toward plus infinity.
    Ceil,
    /// Bitwise (or logical) not.
    Not,
}

impl UnaryOp {
    /// Every operator, in a fixed order.
    pub const ALL: [UnaryOp; 20] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Not,
    ];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Erf => "erf",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Not => "not",
        }
    }

    /// Parses a name printed by [`UnaryOp::name`].
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether the operator is a math function that needs a float operand.
    pub fn is_math(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not)
    }
}

/// A comparison; the result is a bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// Equal (floats: ordered).
    Eq,
    /// Not equal (floats: unordered, so NaN != NaN).
    Ne,
    /// Less than.
    Lt,
    /// Less or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater or equal.
    Ge,
}

impl CmpOp {
    /// Every comparison, in a fixed order.
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }

    /// Parses a name printed by [`CmpOp::name`].
    pub fn from_name(name: &str) -> Option<CmpOp> {
        CmpOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// An element of a store parameter, addressed by one `i64` index value per dimension,
/// relative to the origin of the point task's sub-store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// Index of the store parameter in [`Kernel::params`].
    pub param: u32,
    /// One index per dimension of that store.
    pub indices: Vec<ValueId>,
}

/// A parallel loop over the point task's sub-store of one store parameter.
///
/// Every iteration is independent; a back end may run them in any order and on any number of
/// threads. Parallel loops appear only at the top level of a kernel body; a kernel may hold
/// several, which run one after another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParallelLoop {
    /// The store parameter whose sub-store shape is the iteration space.
    pub over: u32,
    /// The loop's index values (`i64`), one per dimension of `over`.
    pub indices: Vec<ValueId>,
    /// The loop body.
    pub body: Vec<Inst>,
}

/// A sequential loop `for induction in lo..hi` with loop-carried values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ForLoop {
    /// Lower bound (`i64`, inclusive).
    pub lo: ValueId,
    /// Upper bound (`i64`, exclusive).
    pub hi: ValueId,
    /// The induction value (`i64`), defined in the body.
    pub induction: ValueId,
    /// Initial values of the carried values.
    pub init: Vec<ValueId>,
    /// The carried values as seen by the body, one per `init`.
    pub carried: Vec<ValueId>,
    /// The loop body.
    pub body: Vec<Inst>,
    /// The carried values' next values, one per `init`, defined in the body.
    pub yields: Vec<ValueId>,
}

/// An operation. Its results are listed in [`Inst::results`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A constant. One result.
    Const(Scalar),
    /// The value of a scalar parameter (index into [`Kernel::params`]). One result.
    Param(u32),
    /// A binary operation. One result.
    Binary(BinaryOp, ValueId, ValueId),
    /// A unary operation. One result.
    Unary(UnaryOp, ValueId),
    /// A comparison. One `bool` result.
    Cmp(CmpOp, ValueId, ValueId),
    /// `cond ? a : b`. One result.
    Select(ValueId, ValueId, ValueId),
    /// `a * b + c` with one rounding (a fused multiply-add), for floats: the three operands
    /// and the result have one float type. One result.
    Fma(ValueId, ValueId, ValueId),
    /// A conversion to another type. One result.
    Cast(DType, ValueId),
    /// A reinterpretation of the operand's bits as another type of the same size: `f64` and
    /// `i64` either way, `f32` and `i32` either way, or any type as itself. One result. The
    /// bits are those of the value in memory, little-endian (so `bitcast i64 (const f64 1.0)`
    /// is `0x3ff0000000000000`); a NaN's payload is kept.
    Bitcast(DType, ValueId),
    /// A load. One result of the store's element type.
    Load(Access),
    /// A store of a value. No result.
    Store(Access, ValueId),
    /// A reduction of a value into an element. No result.
    Reduce(Access, ReduceOp, ValueId),
    /// The extent (`i64`) of the point task's sub-store of a store parameter along `dim`.
    Extent {
        /// The store parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// The global coordinate (`i64`) of the origin of the point task's sub-store along `dim`,
    /// in the store's own (view) coordinates.
    Origin {
        /// The store parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// A parallel loop (top level only). No result.
    Parallel(ParallelLoop),
    /// A sequential loop. Its results are the carried values' final values.
    For(ForLoop),
}

impl Op {
    /// Whether the operation computes its one result from its operands alone (and from the
    /// task's parameters and sub-store shapes): a constant, a parameter, arithmetic, a
    /// comparison, a select, a cast or bitcast, an extent or an origin. It reads no memory and
    /// has no effect, so two instances with the same operands are the same value, and an
    /// instance may be recomputed or dropped freely.
    pub fn is_value(&self) -> bool {
        matches!(
            self,
            Op::Const(_)
                | Op::Param(_)
                | Op::Binary(..)
                | Op::Unary(..)
                | Op::Cmp(..)
                | Op::Select(..)
                | Op::Fma(..)
                | Op::Cast(..)
                | Op::Bitcast(..)
                | Op::Extent { .. }
                | Op::Origin { .. }
        )
    }
}

/// One instruction: an operation and the values it defines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inst {
    /// The values this instruction defines.
    pub results: Vec<ValueId>,
    /// What it does.
    pub op: Op,
}

/// A kernel: the body of one task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// A name for diagnostics (for example `numeric.add.f64.1d`); it carries provenance.
    pub name: String,
    /// The parameters: stores in task-argument order, and scalars.
    pub params: Vec<Param>,
    /// The top-level body.
    pub body: Vec<Inst>,
}

impl Kernel {
    /// One more than the largest value id used in the kernel (0 if none): the size of a table
    /// indexed by value.
    pub fn value_bound(&self) -> u32 {
        let mut bound = 0;
        visit_defs(&self.body, &mut |v| bound = bound.max(v.0 + 1));
        bound
    }
}

/// Calls `f` on every value defined in `body` (results, loop indices, induction and carried
/// values), in definition order.
pub fn visit_defs(body: &[Inst], f: &mut impl FnMut(ValueId)) {
    for inst in body {
        match &inst.op {
            Op::Parallel(p) => {
                p.indices.iter().copied().for_each(&mut *f);
                visit_defs(&p.body, f);
            }
            Op::For(l) => {
                f(l.induction);
                l.carried.iter().copied().for_each(&mut *f);
                visit_defs(&l.body, f);
            }
            _ => {}
        }
        inst.results.iter().copied().for_each(&mut *f);
    }
}
