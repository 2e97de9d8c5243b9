//! The `stats` plugin (`plugins/stats`, the SDK's worked example: mean, var, clip and zscore
//! of f64 vectors in under 100 lines) through the SDK's test harness: its results against
//! plain Rust, its tasks fused with numeric's, its errors, and its size.

use weft::{Config, DType, Value};
use weft_plugin_test::PluginTest;

fn stats(pieces: u64) -> PluginTest {
    let config = Config {
        threads: 2,
        pieces,
        explain: true,
        component_cache: None,
        ..Config::default()
    };
    PluginTest::load(weft_plugin_artifacts::STATS, config).expect("stats loads beside numeric")
}

/// Plain-Rust mean and population variance.
fn moments(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-12 * want.abs().max(1.0)
}

#[test]
fn mean_var_clip_and_zscore_match_plain_rust_in_one_and_many_pieces() {
    for pieces in [1, 3] {
        let t = stats(pieces);
        let np = t.numeric();
        let n = 10_007u64;
        let x = np.linspace(-3.0, 5.0, n, DType::F64).sin() * 4.0 + 1.5;
        let xs = x.to_vec().unwrap();
        let arg = |a| Value::try_from(a).unwrap();
        let (mean, var) = moments(&xs);

        let got = t.call_array("mean", &[arg(&x)], DType::F64, &[]).unwrap();
        assert!(close(got.item().unwrap(), mean), "pieces {pieces}: mean");
        let got = t.call_array("var", &[arg(&x)], DType::F64, &[]).unwrap();
        assert!(close(got.item().unwrap(), var), "pieces {pieces}: var");

        let clipped = t
            .call_array(
                "clip",
                &[arg(&x), (-1.0).into(), 2.0.into()],
                DType::F64,
                &[n],
            )
            .unwrap();
        let want: Vec<f64> = xs.iter().map(|v| v.clamp(-1.0, 2.0)).collect();
        assert_eq!(
            clipped.to_vec().unwrap(),
            want,
            "pieces {pieces}: clip is exact"
        );

        let z = t
            .call_array("zscore", &[arg(&x)], DType::F64, &[n])
            .unwrap();
        let want: Vec<f64> = xs.iter().map(|v| (v - mean) / var.sqrt()).collect();
        for (i, (g, w)) in z.to_vec().unwrap().iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12,
                "pieces {pieces}: zscore[{i}] {g} vs {w}"
            );
        }
        let (zm, zv) = moments(&z.to_vec().unwrap());
        assert!(zm.abs() < 1e-12 && (zv - 1.0).abs() < 1e-12, "{zm} {zv}");
    }
}

#[test]
fn its_tasks_fuse_with_numerics() {
    let t = stats(1);
    let np = t.numeric();
    let x = np.linspace(0.0, 1.0, 1000, DType::F64);
    let y = &x * 3.0 + 1.0;
    let clipped = t
        .call_array(
            "clip",
            &[Value::try_from(&y).unwrap(), 1.5.into(), 3.5.into()],
            DType::F64,
            &[1000],
        )
        .unwrap();
    let out = clipped.sqrt();
    let want: Vec<f64> = x
        .to_vec()
        .unwrap()
        .iter()
        .map(|v| (v * 3.0 + 1.0).clamp(1.5, 3.5).sqrt())
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    assert!(t.fused_with_numeric("clip"), "{}", t.explanations());
}

#[test]
fn an_empty_vector_has_a_nan_mean_and_variance_as_in_numpy() {
    let t = stats(1);
    let empty = t.numeric().zeros(&[0], DType::F64);
    for op in ["mean", "var"] {
        let got = t
            .call_array(op, &[Value::try_from(&empty).unwrap()], DType::F64, &[])
            .unwrap();
        assert!(got.item().unwrap().is_nan(), "{op}");
    }
}

#[test]
fn bad_arguments_get_errors_naming_the_plugin_and_the_call() {
    let t = stats(1);
    let np = t.numeric();
    let ints = np.zeros(&[4], DType::I64);
    let matrix = np.zeros(&[2, 2], DType::F64);
    let vector = np.zeros(&[4], DType::F64);
    let cases: [(&str, Vec<Value>, &str); 4] = [
        (
            "mean",
            vec![Value::try_from(&ints).unwrap()],
            "needs a 1-dimensional f64 array, not i64",
        ),
        (
            "zscore",
            vec![Value::try_from(&matrix).unwrap()],
            "not f64 of shape (2, 2)",
        ),
        (
            "clip",
            vec![Value::try_from(&vector).unwrap(), 2.0.into(), 1.0.into()],
            "lo 2 > hi 1",
        ),
        (
            "clip",
            vec![
                Value::try_from(&vector).unwrap(),
                f64::NAN.into(),
                1.0.into(),
            ],
            "lo NaN",
        ),
    ];
    for (op, args, says) in cases {
        let e = t.call(op, &args).unwrap_err().to_string();
        assert!(
            e.contains("`stats`") && e.contains(op) && e.contains(says),
            "{op}: {e}"
        );
    }
    // The host keeps running: a good call after the errors.
    let m = t.call_array(
        "mean",
        &[Value::try_from(&vector).unwrap()],
        DType::F64,
        &[],
    );
    assert_eq!(m.unwrap().item().unwrap(), 0.0);
}

#[test]
fn the_plugin_is_at_most_100_lines() {
    let source = include_str!("../../../plugins/stats/src/lib.rs");
    let lines = source.lines().count();
    assert!(lines <= 100, "plugins/stats/src/lib.rs has {lines} lines");
}

/// The guide's section on loading a plugin in an application, as it is written there.
#[test]
fn an_application_loads_the_component_from_its_file_and_calls_it() -> weft::Result<()> {
    let path = weft_plugin_artifacts::STATS_PATH;
    let np = weft::Numeric::new(
        weft::Runtime::new(weft::Config::from_env())?,
        weft_plugin_artifacts::NUMERIC,
    )?;
    let bytes = std::fs::read(path).map_err(|e| weft::Error::Usage(format!("{path}: {e}")))?;
    let stats = np.runtime(|rt| rt.load(&bytes))?;
    let x = np.linspace(-2.0, 2.0, 1000, DType::F64);
    // `invoke` unwraps the function's `result<T, error>`: a plugin's error arrives as
    // `weft::Error::Plugin(PluginError::Plugin { plugin, call, message })`.
    let out = np.runtime(|rt| {
        rt.invoke(
            stats,
            "plugin:stats/ops#clip",
            &[weft::Value::try_from(&x)?, (-1.0).into(), 1.0.into()],
        )
    })?;
    // The returned store as a numeric array, its dtype and shape checked.
    let clipped = np.from_value(out.expect("a store"), DType::F64, &[1000])?;
    let want: Vec<f64> = x.to_vec()?.iter().map(|v| v.clamp(-1.0, 1.0)).collect();
    assert_eq!(clipped.to_vec()?, want);
    Ok(())
}
