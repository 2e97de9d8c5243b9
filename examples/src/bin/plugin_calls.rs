//! How much a call into a plugin costs: a typed export call, a dynamic call, a numeric
//! operation (which also creates a store and submits a task, but runs nothing), and the same
//! operation made by an application component (`examples/apps`' `call_cost`, run by
//! `weft-apps`, which times itself), with its excess over the native operation.
//!
//! Prints one JSON line with the median nanoseconds per call of each, over `--iters` batches of
//! `--n` calls.

use std::process::ExitCode;
use std::time::Instant;

use weft::{Numeric, Runtime, Value};
use weft_examples::{AppError, Cli, timing::median};
use weft_ir::DType;

fn per_call_ns(
    batches: usize,
    calls: u64,
    mut f: impl FnMut() -> Result<(), AppError>,
) -> Result<f64, AppError> {
    let mut samples = Vec::new();
    for _ in 0..batches {
        let start = Instant::now();
        for _ in 0..calls {
            f()?;
        }
        samples.push(start.elapsed().as_secs_f64() * 1e9 / calls as f64);
    }
    Ok(median(&samples))
}

fn run() -> Result<(), AppError> {
    let cli = Cli::new(
        "plugin_calls",
        "the cost of calling into a plugin, in ns per call",
        10_000,
        7,
    );
    let args = cli.parse_env_or_exit();
    let mut rt = Runtime::new(args.config())?;
    let misbehave = rt.load(weft_plugin_artifacts::TEST_MISBEHAVE)?;

    let typed = per_call_ns(args.iters, args.n, || {
        rt.with_plugin(misbehave, "version", |store, _, guest| {
            guest.weft_plugin_plugin().call_version(store)
        })?;
        Ok(())
    })?;
    let dynamic = per_call_ns(args.iters, args.n, || {
        rt.call(misbehave, "weft:testing/misbehave#ok", &[Value::U32(1)])?;
        Ok(())
    })?;

    let np = Numeric::new(rt, weft_plugin_artifacts::NUMERIC)?;
    let a = np.zeros(&[1], DType::F64);
    a.check()?;
    let op = per_call_ns(args.iters, args.n, || {
        (&a + 1.0).check()?;
        Ok(())
    })?;
    np.runtime(|rt| rt.synchronize())?;

    // The component case, on a runtime of its own.
    let host = weft_apps::AppHost::new()?;
    let app = host.compile("call_cost", weft_plugin_artifacts::APP_CALL_COST)?;
    let mut rt = Runtime::new(args.config())?;
    let plugins = vec![rt.load(weft_plugin_artifacts::NUMERIC)?];
    let job = weft_apps::Job {
        name: "call_cost".into(),
        args: vec![args.n.to_string(), args.iters.to_string()],
        capture: true,
        ..weft_apps::Job::default()
    };
    let (outcome, _rt) = host.run(rt, &plugins, &app, &job);
    let outcome = outcome?;
    let reported: serde_json::Value = serde_json::from_slice(&outcome.stdout)?;
    let component = reported["op_submit_ns"]
        .as_f64()
        .ok_or("call_cost printed no op_submit_ns")?;

    let line = serde_json::json!({
        "example": "plugin_calls",
        "n": args.n,
        "iters": args.iters,
        "threads": args.threads,
        "typed_export_call_ns": typed,
        "dynamic_call_ns": dynamic,
        "numeric_op_submit_ns": op,
        "component_op_submit_ns": component,
        "component_excess_ns": component - op,
    });
    println!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    weft_examples::run_main("plugin_calls", run)
}
