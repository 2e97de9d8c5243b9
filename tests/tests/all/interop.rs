//! Typed interop: a store another plugin returns becomes a numeric array (checked dtype and
//! shape) and goes back as a value; dynamic values convert from and to Rust values; a
//! plugin's own error arrives as the host's error naming the plugin and the call.

use weft::{Error, PluginError, Value};
use weft_ir::{DType, Scalar};

const SPARSE: &str = "weft:plugin/sparse@0.1.0#";

#[test]
fn another_plugins_store_becomes_a_numeric_array_and_goes_back() {
    let np = weft_tests::numeric(1);
    let sp = np
        .runtime(|rt| rt.load(weft_plugin_artifacts::SPARSE))
        .expect("sparse loads beside numeric");
    let call = |name: &str, args: &[Value]| {
        np.runtime(|rt| rt.invoke(sp, &format!("{SPARSE}{name}"), args))
    };
    let csr = call(
        "poisson2d",
        &[
            3u64.into(),
            Value::Enum("f64".into()),
            Value::Enum("i32".into()),
        ],
    )
    .expect("poisson2d")
    .expect("a matrix");
    let Value::Record(fields) = csr else {
        panic!("a csr record, got {csr:?}")
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no field {name}"))
    };
    let (pos, crd, vals) = (field("pos"), field("crd"), field("vals"));
    let dense = call(
        "to-dense",
        &[
            pos.clone(),
            crd.clone(),
            vals.clone(),
            9u64.into(),
            9u64.into(),
        ],
    )
    .expect("to-dense")
    .expect("a store");
    let a = np
        .from_value(dense, DType::F64, &[9, 9])
        .expect("a 9x9 f64 array");
    // The 5-point Laplacian on a 3x3 grid, against a plain-Rust construction.
    let got = a.to_vec().unwrap();
    for (k, v) in got.iter().enumerate() {
        let (i, j) = (k / 9, k % 9);
        let (ri, ci, rj, cj) = (i / 3, i % 3, j / 3, j % 3);
        let neighbours = ri.abs_diff(rj) + ci.abs_diff(cj) == 1;
        let want = if i == j {
            4.0
        } else if neighbours {
            -1.0
        } else {
            0.0
        };
        assert_eq!(*v, want, "A[{i}, {j}]");
    }
    // Numeric works on it, and its own arrays go back to the other plugin as values.
    assert_eq!(a.sum().item().unwrap(), 36.0 - 24.0);
    let vals_array = np
        .from_value(vals.clone(), DType::F64, &[33])
        .expect("33 entries");
    let doubled_vals = &vals_array * 2.0;
    let again = call(
        "to-dense",
        &[
            pos,
            crd,
            Value::try_from(&doubled_vals).unwrap(),
            9u64.into(),
            9u64.into(),
        ],
    )
    .unwrap()
    .unwrap();
    let twice = np.from_value(again, DType::F64, &[9, 9]).unwrap();
    assert_eq!(twice.to_vec().unwrap(), (&a * 2.0).to_vec().unwrap());

    // A wrong expectation is an error that says what the store is.
    let e = np
        .from_store(a.store().unwrap(), DType::F32, &[9, 9])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expected a f32 array of shape (9, 9)") && e.contains("f64"),
        "{e}"
    );
    let e = np
        .from_value(Value::U64(3), DType::F64, &[1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a store"), "{e}");

    // The plugin's own error arrives as the host's, naming the plugin and the call.
    let e = call(
        "poisson2d",
        &[
            0u64.into(),
            Value::Enum("f64".into()),
            Value::Enum("bool".into()),
        ],
    )
    .unwrap_err();
    match &e {
        Error::Plugin(PluginError::Plugin {
            plugin,
            call,
            message,
        }) => {
            assert_eq!(plugin, "sparse");
            assert!(call.ends_with("#poisson2d"), "{call}");
            assert!(!message.is_empty());
        }
        other => panic!("expected the plugin's error, got {other:?}"),
    }
}

#[test]
fn values_convert_from_and_to_rust_values() {
    assert!(matches!(Value::from(2.5), Value::F64(v) if v == 2.5));
    assert!(matches!(Value::from(7u64), Value::U64(7)));
    assert!(matches!(Value::from(-3i32), Value::S32(-3)));
    assert!(matches!(Value::from("x"), Value::String(s) if s == "x"));
    assert_eq!(f64::try_from(Value::F64(1.5)).unwrap(), 1.5);
    assert!(matches!(u64::try_from(Value::F64(1.5)), Err(Value::F64(_))));
    let list = Value::from(vec![1u64, 2, 3]);
    assert!(matches!(&list, Value::List(v) if v.len() == 3));
    // numeric's `operand::scalar(f64(2.5))`.
    let operand = Value::case("scalar", Scalar::F64(2.5));
    let Value::Variant(case, Some(payload)) = operand else {
        panic!("a variant")
    };
    assert_eq!(case, "scalar");
    assert_eq!(Scalar::try_from(*payload).unwrap(), Scalar::F64(2.5));
    assert!(Scalar::try_from(Value::Bool(true)).is_err());
    // A `result` that is not an error unwraps to its payload.
    let ok = Value::Result(Ok(Some(Box::new(Value::U32(4)))));
    assert!(matches!(
        ok.into_plugin_result("p", "f"),
        Ok(Some(Value::U32(4)))
    ));
    let err = Value::Result(Err(Some(Box::new(Value::Record(vec![(
        "message".into(),
        Value::String("bad".into()),
    )])))));
    let e = err.into_plugin_result("p", "f").unwrap_err().to_string();
    assert!(
        e.contains("p") && e.contains("f") && e.contains("bad"),
        "{e}"
    );
}
