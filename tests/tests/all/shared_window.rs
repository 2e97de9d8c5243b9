//! The shared window: the numeric plugin and a hostile plugin submit into one window, and
//! their tasks fuse. A task of the hostile plugin fails (an index out of bounds), and:
//! - the failure is attributed to that task, even when it ran fused with the numeric
//!   plugin's tasks (the fused task runs again unfused from a snapshot);
//! - the numeric tasks still run, and their results are right (against plain Rust);
//! - whatever read the failed task's output gets an error of its own, naming itself and the
//!   failure;
//! - the numeric calls that happened to run the failing task get no error.

use weft::numeric::{Array, BinaryOp, Numeric};
use weft::{Config, DType, PluginLimits, Value};

const MISBEHAVE: &str = "weft:testing/misbehave#";

fn numeric(window_bound: usize) -> Numeric {
    weft_tests::numeric_with(Config {
        component_cache: None,
        explain: true,
        window_bound,
        ..Config::default()
    })
}

fn load_misbehave(np: &Numeric) -> weft::PluginId {
    np.runtime(|rt| {
        rt.load_with_limits(
            weft_plugin_artifacts::TEST_MISBEHAVE,
            PluginLimits::default(),
        )
    })
    .expect("loads")
}

/// Submits the hostile plugin's `dst[i] = src[i + shift]` (pending, not read back).
fn shifted_copy(np: &Numeric, p: weft::PluginId, src: &Array, dst: &Array, shift: i64) {
    shifted(np, p, "shifted-copy", src, dst, shift);
}

/// Submits the hostile plugin's task of kernel `key` (`shifted-copy` or `shifted-add`).
fn shifted(np: &Numeric, p: weft::PluginId, key: &str, src: &Array, dst: &Array, shift: i64) {
    let args = [
        Value::String(key.into()),
        Value::ReadOnly(src.handle().expect("an array").clone()),
        Value::Store(dst.handle().expect("an array").clone()),
        Value::S64(shift),
    ];
    let out = np
        .runtime(|rt| rt.call(p, &format!("{MISBEHAVE}shifted"), &args))
        .expect("the call returns");
    assert!(
        matches!(out.as_slice(), [Value::Result(Ok(None))]),
        "the task was submitted: {out:?}"
    );
}

#[test]
fn a_failing_task_fused_with_another_plugins_is_attributed_to_its_owner_and_the_others_run() {
    let np = numeric(256);
    let p = load_misbehave(&np);
    let n = 1000;
    let values: Vec<f64> = (0..n).map(|i| (i + 1) as f64 * 0.5).collect();
    let a = np.from_vec(&[n as u64], &values);
    let ok_out = np.full(&[n as u64], 1.0, DType::F64);
    let bad_out = np.zeros(&[n as u64], DType::F64);
    np.runtime(|rt| rt.flush()).expect("the set-up runs");
    np.runtime(|rt| rt.take_explanations());
    // One window: numeric, hostile (in bounds, in place: the fused run clobbers `ok_out`,
    // which running the tasks again needs), numeric, hostile (out of bounds), numeric.
    let c = a.binary(BinaryOp::Add, &a);
    shifted(&np, p, "shifted-add", &a, &ok_out, 0);
    let d = c.binary(BinaryOp::Mul, 3.0);
    // Out of bounds at the last element only: most of the fused run happens first.
    shifted_copy(&np, p, &a, &bad_out, 1);
    let e = d.binary(BinaryOp::Sub, 1.0);
    let err = np
        .runtime(|rt| rt.flush())
        .expect_err("the failure is reported");
    let text = err.to_string();
    assert!(
        text.contains("misbehave.shifted-copy") && text.contains("out of bounds"),
        "attributed to the hostile task alone: {text}"
    );
    assert!(!text.contains("fused("), "named unfused: {text}");
    // The tasks ran fused at first: one fused task held both plugins' tasks.
    let explained = np.runtime(|rt| rt.take_explanations()).join("\n");
    assert!(
        explained.contains("misbehave.shifted-copy")
            && explained.contains("misbehave.shifted-add")
            && explained.contains("numeric."),
        "{explained}"
    );
    // The numeric results are right, and so is the hostile plugin's task that did not fail.
    let want_e: Vec<f64> = values.iter().map(|v| (v + v) * 3.0 - 1.0).collect();
    assert_eq!(e.to_vec().expect("numeric results"), want_e);
    let want_ok: Vec<f64> = values.iter().map(|v| 1.0 + v).collect();
    assert_eq!(
        ok_out.to_vec().expect("in-bounds update"),
        want_ok,
        "updated once, from the contents it had before the fused run"
    );
    // The failed task's output reports the failure, and so does what reads it.
    let read = bad_out.to_vec().expect_err("no value");
    assert!(read.to_string().contains("out of bounds"), "{read}");
    let after = bad_out.binary(BinaryOp::Add, 1.0);
    let read = after.to_vec().expect_err("computed from no value");
    let text = read.to_string();
    assert!(
        text.contains("plugin `numeric`")
            && text.contains("not run")
            && text.contains("misbehave.shifted-copy"),
        "its own error, naming the cause: {text}"
    );
    // Reported once: the window is clean again.
    np.runtime(|rt| rt.flush()).expect("nothing left to report");
}

/// The length of the one-plugin tests' stores.
const N: usize = 64;

/// The one-plugin tests' start: the numeric plugin with the hostile one loaded beside it,
/// `a` (all twos) and two zeroed outputs, created and run, with no explanation pending.
fn one_plugin_set_up() -> (Numeric, weft::PluginId, [Array; 3]) {
    let np = numeric(256);
    let p = load_misbehave(&np);
    let a = np.from_vec(&[N as u64], &vec![2.0; N]);
    let first = np.zeros(&[N as u64], DType::F64);
    let second = np.zeros(&[N as u64], DType::F64);
    np.runtime(|rt| rt.flush()).expect("the set-up runs");
    np.runtime(|rt| rt.take_explanations());
    (np, p, [a, first, second])
}

#[test]
fn a_failing_fused_task_of_one_plugin_runs_again_unfused_where_it_clobbered_nothing() {
    let (np, p, [a, first, second]) = one_plugin_set_up();
    let n = N;
    shifted_copy(&np, p, &a, &first, 0);
    shifted_copy(&np, p, &a, &second, n as i64);
    let err = np
        .runtime(|rt| rt.flush())
        .expect_err("the failure is reported");
    let text = err.to_string();
    assert!(
        text.contains("misbehave.shifted-copy") && !text.contains("fused("),
        "{text}"
    );
    let explained = np.runtime(|rt| rt.take_explanations()).join("\n");
    assert!(
        explained.matches("misbehave.shifted-copy").count() >= 2,
        "fused: {explained}"
    );
    // The task that did not fail ran again, alone; the other holds no value.
    assert_eq!(first.to_vec().expect("ran again"), vec![2.0; n]);
    assert!(second.to_vec().is_err());
}

#[test]
fn a_failing_fused_task_of_one_plugin_that_clobbered_its_input_loses_its_parts() {
    let (np, p, [a, first, second]) = one_plugin_set_up();
    let n = N;
    let other = np.zeros(&[n as u64], DType::F64);
    // Run now: a pending numeric task would make the fused task below one of two plugins.
    np.runtime(|rt| rt.flush()).expect("the set-up runs");
    // In place: once the fused task has run, `first`'s old contents are gone.
    shifted(&np, p, "shifted-add", &a, &first, 0);
    shifted(&np, p, "shifted-add", &a, &second, n as i64);
    let err = np
        .runtime(|rt| rt.flush())
        .expect_err("the failure is reported");
    assert!(err.to_string().contains("out of bounds"), "{err}");
    // Both parts of the one plugin's fused task are lost, each with its own error.
    for (store, name) in [(&first, "first"), (&second, "second")] {
        let lost = store.to_vec().expect_err("lost").to_string();
        assert!(
            lost.contains("misbehave.shifted-add") && lost.contains("lost: it ran fused"),
            "{name}: {lost}"
        );
    }
    // A store the plugin never touched is fine, and the plugin works again.
    assert_eq!(other.to_vec().expect("untouched"), vec![0.0; n]);
    shifted_copy(&np, p, &a, &first, 0);
    assert_eq!(first.to_vec().expect("written whole again"), vec![2.0; n]);
}

#[test]
fn a_bad_task_does_not_fail_the_other_plugins_calls_that_run_it() {
    // A window of two tasks: the numeric call after the bad task runs it.
    let np = numeric(2);
    let p = load_misbehave(&np);
    let n = 16;
    let a = np.from_vec(&[n as u64], &vec![1.0; n]);
    let bad_out = np.zeros(&[n as u64], DType::F64);
    np.runtime(|rt| rt.flush()).expect("the set-up runs");
    shifted_copy(&np, p, &a, &bad_out, 1 << 40);
    let mut sums = Vec::new();
    let mut x = a.clone();
    for _ in 0..8 {
        x = x.binary(BinaryOp::Add, 1.0);
        sums.push(x.sum());
    }
    for (k, s) in sums.iter().enumerate() {
        assert_eq!(
            s.item().expect("numeric work is unaffected"),
            (k + 2) as f64 * n as f64
        );
    }
    let err = np
        .runtime(|rt| rt.flush())
        .expect_err("the failure waits for a flush");
    assert!(err.to_string().contains("misbehave.shifted-copy"), "{err}");
}
