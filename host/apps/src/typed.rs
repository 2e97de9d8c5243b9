//! Typed forwarding of the numeric functions an application calls most (`binary`, `unary`,
//! `select`, `assign`, `copy`, `reduce`, `astype`, `dot`, `norm`, `matvec`, `matmul`).
//!
//! The other plugin functions are forwarded with dynamic values ([`super::linking`]): wasmtime
//! lifts the application's arguments into `Val`s, they become [`Value`]s, and the call's
//! recording key is built from them word by word, names included. For these functions
//! wasmtime lifts the arguments into Rust types instead (no `Val`s), the key is a few words,
//! and the dynamic values are built only when the call is made for real (the first time, or
//! when its recording no longer matches). Both paths make the same plugin call and keep
//! their recordings in the same bounded set, so an application sees the same results either
//! way.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, LinkerInstance, Resource};
use weft::Value;
use weft_plugin::bindings::base::weft::plugin::types as wit;
use weft_plugin::bindings::numeric::exports::weft::plugin::numeric::{
    BinaryOp, Reduction, UnaryOp,
};
use weft_runtime::StoreHandle;

use crate::linking::{AppState, AppStore, CallKey, Made, replay_or_call};

/// The numeric interface's name, as components import it.
pub const NUMERIC_INTERFACE: &str = "weft:plugin/numeric@0.1.0";

/// The numeric functions forwarded with typed arguments.
pub const TYPED: [&str; 11] = [
    "binary", "unary", "select", "assign", "copy", "reduce", "astype", "dot", "norm", "matvec",
    "matmul",
];

/// numeric's `operand`, with the application's store handle.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub enum Operand {
    /// A store the application lends.
    #[component(name = "array")]
    Array(Resource<AppStore>),
    /// A scalar, broadcast.
    #[component(name = "scalar")]
    Scalar(wit::Scalar),
}

/// What a typed function returns: a new store the application owns, or the plugin's error.
type Made1 = (Result<Resource<AppStore>, wit::Error>,);

/// An argument of a typed call as it came, made a dynamic value only for a real call.
enum Arg {
    /// A lent store.
    Store(StoreHandle),
    /// An enum's case, by its WIT name.
    Case(&'static str),
    /// An operand's array.
    Array(StoreHandle),
    /// An operand's scalar: its case's name and its payload.
    Scalar(&'static str, Value),
}

impl Arg {
    /// The dynamic value the plugin's export takes.
    fn value(self) -> Value {
        match self {
            Arg::Store(h) => Value::Store(h),
            Arg::Case(name) => Value::Enum(name.into()),
            Arg::Array(h) => variant("array", Value::Store(h)),
            Arg::Scalar(case, v) => variant("scalar", variant(case, v)),
        }
    }
}

/// One call being forwarded: its recording key, the stores it lends (in the order the
/// dynamic call lends them: depth first through its arguments), and its arguments.
struct Call {
    key: CallKey,
    ids: Vec<weft_runtime::StoreId>,
    args: Vec<Arg>,
}

impl Call {
    fn new(name: &Arc<str>) -> Call {
        Call {
            key: CallKey::new(name.clone()),
            ids: Vec::with_capacity(3),
            args: Vec::with_capacity(3),
        }
    }

    /// Lends a borrowed store: its handle.
    fn lend(
        &mut self,
        cx: &mut StoreContextMut<'_, AppState>,
        r: &Resource<AppStore>,
    ) -> wasmtime::Result<StoreHandle> {
        let h = cx.data_mut().table.get(r)?.handle.clone();
        self.key.words.push(22);
        self.ids.push(h.id());
        Ok(h)
    }

    /// A borrowed store.
    fn store(
        &mut self,
        cx: &mut StoreContextMut<'_, AppState>,
        r: &Resource<AppStore>,
    ) -> wasmtime::Result<&mut Self> {
        let h = self.lend(cx, r)?;
        self.args.push(Arg::Store(h));
        Ok(self)
    }

    /// An enum's case, by its index and its WIT name.
    fn case(&mut self, index: u64, name: &'static str) -> &mut Self {
        self.key.words.extend([17, index]);
        self.args.push(Arg::Case(name));
        self
    }

    /// An operand.
    fn operand(
        &mut self,
        cx: &mut StoreContextMut<'_, AppState>,
        o: &Operand,
    ) -> wasmtime::Result<&mut Self> {
        match o {
            Operand::Array(r) => {
                self.key.words.push(0);
                let h = self.lend(cx, r)?;
                self.args.push(Arg::Array(h));
            }
            Operand::Scalar(s) => {
                let (word, case, v) = scalar(*s);
                self.key.words.extend([1, word.0, word.1]);
                self.args.push(Arg::Scalar(case, v));
            }
        }
        Ok(self)
    }

    /// Makes the call: replayed from its recording when that matches, else for real.
    fn make(
        self,
        cx: &mut StoreContextMut<'_, AppState>,
        interface: &str,
    ) -> wasmtime::Result<Result<Option<StoreHandle>, wit::Error>> {
        let Call { key, ids, args } = self;
        let call = key.call.clone();
        let values = move || args.into_iter().map(Arg::value).collect();
        match replay_or_call(cx.data_mut(), interface, key, &ids, values)? {
            Made::Replayed(h) => Ok(Ok(h)),
            Made::Called(out) => match out.as_slice() {
                [Value::Result(Ok(Some(v)))] => match &**v {
                    Value::Store(h) | Value::ReadOnly(h) => Ok(Ok(Some(h.clone()))),
                    _ => wasmtime::bail!("call `{call}`: the plugin returned no store"),
                },
                [Value::Result(Ok(None))] => Ok(Ok(None)),
                [Value::Result(Err(Some(e)))] => Ok(Err(error_of(e))),
                _ => wasmtime::bail!("call `{call}`: the plugin gave results of another type"),
            },
        }
    }

    /// [`Call::make`] for a function that returns a new store.
    fn make_store(
        self,
        cx: &mut StoreContextMut<'_, AppState>,
        interface: &str,
    ) -> wasmtime::Result<Made1> {
        let call = self.key.call.clone();
        Ok((match self.make(cx, interface)? {
            Ok(Some(handle)) => Ok(cx.data_mut().table.push(AppStore { handle })?),
            Ok(None) => wasmtime::bail!("call `{call}`: the plugin returned no store"),
            Err(e) => Err(e),
        },))
    }
}

/// A variant case with a payload, as a dynamic value.
fn variant(case: &str, payload: Value) -> Value {
    Value::Variant(case.into(), Some(Box::new(payload)))
}

/// A scalar's key words, its case's name and its payload.
fn scalar(s: wit::Scalar) -> ((u64, u64), &'static str, Value) {
    match s {
        wit::Scalar::F32(x) => ((0, u64::from(x.to_bits())), "f32", Value::F32(x)),
        wit::Scalar::F64(x) => ((1, x.to_bits()), "f64", Value::F64(x)),
        wit::Scalar::I32(x) => ((2, x as u64), "i32", Value::S32(x)),
        wit::Scalar::I64(x) => ((3, x as u64), "i64", Value::S64(x)),
        wit::Scalar::Bool(x) => ((4, u64::from(x)), "bool", Value::Bool(x)),
    }
}

/// The message of a `types.error` record given back as a dynamic value.
fn error_of(v: &Value) -> wit::Error {
    let message = match v {
        Value::Record(fields) => fields.iter().find_map(|(n, v)| match (n.as_str(), v) {
            ("message", Value::String(m)) => Some(m.clone()),
            _ => None,
        }),
        _ => None,
    };
    wit::Error {
        message: message.unwrap_or_else(|| "the plugin's error carried no message".into()),
    }
}

/// WIT's name of a binary operation.
fn binary_name(op: BinaryOp) -> &'static str {
    use BinaryOp::*;
    match op {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        Pow => "pow",
        Minimum => "minimum",
        Maximum => "maximum",
        Equal => "equal",
        NotEqual => "not-equal",
        Less => "less",
        LessEqual => "less-equal",
        Greater => "greater",
        GreaterEqual => "greater-equal",
        LogicalAnd => "logical-and",
        LogicalOr => "logical-or",
        Remainder => "remainder",
        Arctan2 => "arctan2",
        BitwiseAnd => "bitwise-and",
        BitwiseOr => "bitwise-or",
        BitwiseXor => "bitwise-xor",
        LeftShift => "left-shift",
        RightShift => "right-shift",
    }
}

/// WIT's name of a unary operation.
fn unary_name(op: UnaryOp) -> &'static str {
    use UnaryOp::*;
    match op {
        Neg => "neg",
        Abs => "abs",
        Sqrt => "sqrt",
        Exp => "exp",
        Log => "log",
        Sin => "sin",
        Cos => "cos",
        Tanh => "tanh",
        Erf => "erf",
        LogicalNot => "logical-not",
        Floor => "floor",
        Ceil => "ceil",
        Arcsin => "arcsin",
        Arccos => "arccos",
        Arctan => "arctan",
        Sinh => "sinh",
        Cosh => "cosh",
        Arcsinh => "arcsinh",
        Arccosh => "arccosh",
        Arctanh => "arctanh",
        Invert => "invert",
    }
}

/// WIT's name of a reduction.
fn reduction_name(op: Reduction) -> &'static str {
    match op {
        Reduction::Sum => "sum",
        Reduction::Prod => "prod",
        Reduction::Min => "min",
        Reduction::Max => "max",
    }
}

/// WIT's name of an element type.
fn dtype_name(d: wit::Dtype) -> &'static str {
    use wit::Dtype::*;
    match d {
        F32 => "f32",
        F64 => "f64",
        I32 => "i32",
        I64 => "i64",
        Bool => "bool",
        U8 => "u8",
        U16 => "u16",
        U32 => "u32",
        U64 => "u64",
    }
}

/// Defines the [`TYPED`] functions of numeric (imported as `interface`) in `inst`.
pub fn add_numeric(
    inst: &mut LinkerInstance<'_, AppState>,
    interface: &str,
) -> wasmtime::Result<()> {
    let name = |f: &str| -> Arc<str> { format!("{interface}#{f}").into() };
    let it: Arc<str> = interface.into();

    let (n, i) = (name("binary"), it.clone());
    inst.func_wrap(
        "binary",
        move |mut cx: StoreContextMut<'_, AppState>, (op, a, b): (BinaryOp, Operand, Operand)| {
            let mut c = Call::new(&n);
            c.case(op as u64, binary_name(op));
            c.operand(&mut cx, &a)?.operand(&mut cx, &b)?;
            c.make_store(&mut cx, &i)
        },
    )?;
    let (n, i) = (name("unary"), it.clone());
    inst.func_wrap(
        "unary",
        move |mut cx: StoreContextMut<'_, AppState>, (op, a): (UnaryOp, Resource<AppStore>)| {
            let mut c = Call::new(&n);
            c.case(op as u64, unary_name(op)).store(&mut cx, &a)?;
            c.make_store(&mut cx, &i)
        },
    )?;
    let (n, i) = (name("select"), it.clone());
    inst.func_wrap(
        "select",
        move |mut cx: StoreContextMut<'_, AppState>,
              (cond, a, b): (Resource<AppStore>, Operand, Operand)| {
            let mut c = Call::new(&n);
            c.store(&mut cx, &cond)?
                .operand(&mut cx, &a)?
                .operand(&mut cx, &b)?;
            c.make_store(&mut cx, &i)
        },
    )?;
    let (n, i) = (name("assign"), it.clone());
    inst.func_wrap(
        "assign",
        move |mut cx: StoreContextMut<'_, AppState>, (dst, src): (Resource<AppStore>, Operand)| {
            let mut c = Call::new(&n);
            c.store(&mut cx, &dst)?.operand(&mut cx, &src)?;
            let call = c.key.call.clone();
            Ok((match c.make(&mut cx, &i)? {
                Ok(None) => Ok(()),
                Ok(Some(_)) => wasmtime::bail!("call `{call}`: the plugin returned a store"),
                Err(e) => Err(e),
            },))
        },
    )?;
    for one in ["copy", "norm"] {
        let (n, i) = (name(one), it.clone());
        inst.func_wrap(
            one,
            move |mut cx: StoreContextMut<'_, AppState>, (a,): (Resource<AppStore>,)| {
                let mut c = Call::new(&n);
                c.store(&mut cx, &a)?;
                c.make_store(&mut cx, &i)
            },
        )?;
    }
    let (n, i) = (name("reduce"), it.clone());
    inst.func_wrap(
        "reduce",
        move |mut cx: StoreContextMut<'_, AppState>, (op, a): (Reduction, Resource<AppStore>)| {
            let mut c = Call::new(&n);
            c.case(op as u64, reduction_name(op)).store(&mut cx, &a)?;
            c.make_store(&mut cx, &i)
        },
    )?;
    let (n, i) = (name("astype"), it.clone());
    inst.func_wrap(
        "astype",
        move |mut cx: StoreContextMut<'_, AppState>, (a, d): (Resource<AppStore>, wit::Dtype)| {
            let mut c = Call::new(&n);
            c.store(&mut cx, &a)?.case(d as u64, dtype_name(d));
            c.make_store(&mut cx, &i)
        },
    )?;
    for two in ["dot", "matvec", "matmul"] {
        let (n, i) = (name(two), it.clone());
        inst.func_wrap(
            two,
            move |mut cx: StoreContextMut<'_, AppState>,
                  (a, b): (Resource<AppStore>, Resource<AppStore>)| {
                let mut c = Call::new(&n);
                c.store(&mut cx, &a)?.store(&mut cx, &b)?;
                c.make_store(&mut cx, &i)
            },
        )?;
    }
    Ok(())
}
