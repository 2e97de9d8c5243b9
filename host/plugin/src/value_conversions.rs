//! Conversions between Rust values and the dynamic [`Value`]s of `PluginHost::call`: scalars,
//! strings, stores, the `scalar` variant of `weft:plugin/types`, and the `result<T, error>`
//! every plugin function returns, whose error becomes [`Error::Plugin`].

use weft_ir::Scalar;
use weft_runtime::StoreHandle;

use crate::dynamic::Value;
use crate::error::Error;

macro_rules! value_from {
    ($($t:ty => $case:ident),* $(,)?) => {
        $(
            impl From<$t> for Value {
                fn from(v: $t) -> Value {
                    Value::$case(v)
                }
            }

            impl TryFrom<Value> for $t {
                type Error = Value;

                /// The value, if it is this case; otherwise the value back.
                fn try_from(v: Value) -> Result<$t, Value> {
                    match v {
                        Value::$case(x) => Ok(x),
                        other => Err(other),
                    }
                }
            }
        )*
    };
}

value_from! {
    bool => Bool,
    i32 => S32,
    u32 => U32,
    i64 => S64,
    u64 => U64,
    f32 => F32,
    f64 => F64,
    String => String,
    StoreHandle => Store,
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_string())
    }
}

impl From<&StoreHandle> for Value {
    fn from(v: &StoreHandle) -> Value {
        Value::Store(v.clone())
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::List(v.into_iter().map(Into::into).collect())
    }
}

impl From<Scalar> for Value {
    /// The `scalar` variant of `weft:plugin/types` (`f64(2.5)`, `i32(3)`, ...).
    fn from(s: Scalar) -> Value {
        let (case, v) = match s {
            Scalar::F32(v) => ("f32", Value::F32(v)),
            Scalar::F64(v) => ("f64", Value::F64(v)),
            Scalar::I32(v) => ("i32", Value::S32(v)),
            Scalar::I64(v) => ("i64", Value::S64(v)),
            Scalar::Bool(v) => ("bool", Value::Bool(v)),
        };
        Value::Variant(case.to_string(), Some(Box::new(v)))
    }
}

impl TryFrom<Value> for Scalar {
    type Error = Value;

    /// A `scalar` variant of `weft:plugin/types`; otherwise the value back.
    fn try_from(v: Value) -> Result<Scalar, Value> {
        match v {
            Value::Variant(case, Some(payload)) => match (case.as_str(), *payload) {
                ("f32", Value::F32(x)) => Ok(Scalar::F32(x)),
                ("f64", Value::F64(x)) => Ok(Scalar::F64(x)),
                ("i32", Value::S32(x)) => Ok(Scalar::I32(x)),
                ("i64", Value::S64(x)) => Ok(Scalar::I64(x)),
                ("bool", Value::Bool(x)) => Ok(Scalar::Bool(x)),
                (_, payload) => Err(Value::Variant(case, Some(Box::new(payload)))),
            },
            other => Err(other),
        }
    }
}

impl Value {
    /// An operand variant case holding a scalar (`operand::scalar(f64(2.5))` of numeric's
    /// interface): `Value::case("scalar", Scalar::F64(2.5))`.
    pub fn case(name: &str, payload: impl Into<Value>) -> Value {
        Value::Variant(name.to_string(), Some(Box::new(payload.into())))
    }

    /// What a plugin function's `result<T, error>` holds: `Ok(Some(payload))`, `Ok(None)` for
    /// `result<_, error>`, or the plugin's error as [`Error::Plugin`] naming `plugin` and
    /// `call` (its message is the `error` record's `message`). A value that is not a
    /// `result` is returned as it is.
    pub fn into_plugin_result(self, plugin: &str, call: &str) -> Result<Option<Value>, Error> {
        match self {
            Value::Result(Ok(payload)) => Ok(payload.map(|b| *b)),
            Value::Result(Err(e)) => {
                let message = match e.map(|b| *b) {
                    Some(Value::Record(fields)) => fields
                        .into_iter()
                        .find(|(name, _)| name == "message")
                        .map(|(_, v)| match v {
                            Value::String(s) => s,
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_else(|| "an error without a message".to_string()),
                    Some(Value::String(s)) => s,
                    Some(other) => format!("{other:?}"),
                    None => "an error without a payload".to_string(),
                };
                Err(Error::Plugin {
                    plugin: plugin.to_string(),
                    call: call.to_string(),
                    message,
                })
            }
            other => Ok(Some(other)),
        }
    }
}
