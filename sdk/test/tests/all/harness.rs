//! The harness with the `stats` plugin (as `plugins/artifacts` embeds it) beside numeric:
//! functions called by their WIT and their Rust names, and a harness test configured by the
//! environment (`WEFT_PIECES`, `WEFT_EXPLAIN`) while it still gathers explanations.

use std::process::Command;

use weft_plugin_test::{DType, PluginTest, Value};

fn stats() -> PluginTest {
    PluginTest::load(weft_plugin_artifacts::STATS, PluginTest::config())
        .expect("stats loads beside numeric")
}

fn arg(a: &weft_plugin_test::Array) -> Value {
    Value::try_from(a).expect("a numeric array is a store")
}

#[test]
fn functions_are_called_by_their_wit_or_their_rust_names() {
    let t = stats();
    assert_eq!(
        t.export("box-blur").expect("WIT"),
        "plugin:stats/image#box-blur"
    );
    assert_eq!(
        t.export("box_blur").expect("Rust"),
        "plugin:stats/image#box-blur"
    );
    let x = t.numeric().from_f64s(&[3, 4], &[1.0; 12], DType::F64);
    for name in ["box-blur", "box_blur", "plugin:stats/image#box_blur"] {
        let y = t.call_array(name, &[arg(&x)], DType::F64, &[3, 4]);
        assert_eq!(
            y.expect(name).to_vec().expect("read"),
            vec![1.0; 12],
            "{name}"
        );
    }
    let e = t.export("box_blurs").unwrap_err().to_string();
    assert!(e.contains("exports no function `box_blurs`"), "{e}");
    assert!(
        e.contains("plugin:stats/image#box-blur"),
        "it lists its exports: {e}"
    );
}

/// The name of the test that runs in a child process with the environment set.
const CHILD: &str = "harness::child_runs_with_weft_pieces_and_weft_explain";

#[test]
fn weft_pieces_and_weft_explain_reach_a_harness_test() {
    let exe = std::env::current_exe().expect("the test binary");
    // WEFT_EXPLAIN=1 prints a summary of each run of the window, at the test's call sites;
    // WEFT_EXPLAIN=2 every decision in full, naming the kernels.
    for (level, printed) in [
        (
            "1",
            [
                "tasks -> one task running",
                "at sdk/test/tests/all/harness.rs:",
            ],
        ),
        ("2", ["weft fusion:", "  - stats.clip"]),
    ] {
        let out = Command::new(&exe)
            .args([CHILD, "--exact", "--include-ignored", "--nocapture"])
            .env("WEFT_PIECES", "3")
            .env("WEFT_EXPLAIN", level)
            .output()
            .expect("the test binary runs");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child failed with WEFT_EXPLAIN={level}:\n{stdout}\n{stderr}"
        );
        assert!(
            printed.iter().all(|p| stderr.contains(p)),
            "WEFT_EXPLAIN={level} printed no explanation on stderr ({printed:?}):\n{stderr}"
        );
    }
}

/// Run by the test above, with `WEFT_PIECES=3` and `WEFT_EXPLAIN` set.
#[test]
#[ignore = "run by weft_pieces_and_weft_explain_reach_a_harness_test, with its environment"]
fn child_runs_with_weft_pieces_and_weft_explain() {
    let t = stats();
    let (pieces, to_stderr) = t
        .numeric()
        .runtime(|rt| (rt.config().pieces, rt.config().explain_to_stderr));
    assert_eq!((pieces, to_stderr), (3, true), "the environment's settings");
    let np = t.numeric();
    let x = np.linspace(0.0, 1.0, 100, DType::F64);
    let tripled = &x * 3.0;
    let clipped = t.call_array(
        "clip",
        &[arg(&tripled), 0.5.into(), 2.0.into()],
        DType::F64,
        &[100],
    );
    let y = clipped.expect("clip").sqrt();
    // Reading `y` runs linspace, `* 3.0`, clip and sqrt, fused.
    let got = y.to_vec().expect("y");
    let want: Vec<f64> = (x.to_vec().expect("x").iter())
        .map(|v| (v * 3.0).clamp(0.5, 2.0).sqrt())
        .collect();
    assert_eq!(got, want);
    // Printed, and still gathered for the assertions.
    assert!(t.fused_with_numeric("clip"), "gathered while printed");
}
