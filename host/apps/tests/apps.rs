//! Application components run by `AppHost`: their calls fuse and give the bits of the same
//! program run natively, and hostile ones fail alone with clear errors.

use std::time::Duration;

use weft::{Config, DType, Numeric, Runtime};
use weft_apps::{AppHost, AppLimits, Job};
use weft_plugin_artifacts as artifacts;
use weft_runtime::PluginId;

/// A runtime with numeric and sparse loaded, and their ids.
fn runtime() -> (Runtime, Vec<PluginId>) {
    let mut rt = Runtime::new(Config::default()).expect("runtime");
    let numeric = rt.load(artifacts::NUMERIC).expect("numeric");
    let sparse = rt.load(artifacts::SPARSE).expect("sparse");
    (rt, vec![numeric, sparse])
}

fn job(name: &str, args: &[&str]) -> Job {
    Job {
        name: name.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        capture: true,
        ..Job::default()
    }
}

#[test]
fn tiny_add_prints_the_native_sum() {
    let host = AppHost::new().expect("host");
    let app = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    let (rt, plugins) = runtime();
    let (outcome, _rt) = host.run(rt, &plugins, &app, &job("tiny_add", &[]));
    let outcome = outcome.expect("runs");
    assert_eq!(
        outcome.status,
        0,
        "stderr: {}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    let np = Numeric::new(
        Runtime::new(Config::default()).expect("rt"),
        artifacts::NUMERIC,
    )
    .expect("numeric");
    let a = np.arange(0.0, 8.0, 1.0, DType::F64);
    let b = np.full(&[8], 0.5, DType::F64);
    let native = (&a + &b).sum().item().expect("native sum");
    assert_eq!(
        String::from_utf8_lossy(&outcome.stdout).trim(),
        format!("{native}")
    );
}

/// The tasks a runtime submitted and ran, and the bytes of an `f64` vector.
fn counts(rt: &mut Runtime) -> (u64, u64) {
    let s = rt.stats();
    (s.tasks_submitted, s.exec.tasks_executed)
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn black_scholes_as_a_component_gives_the_native_bits_and_fuses_the_same() {
    let (n, seed) = (10_000u64, 7u64);
    let dir = std::env::temp_dir().join(format!("weft-apps-bs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let host = AppHost::new().expect("host");
    let app = host
        .compile("black_scholes_app", artifacts::APP_BLACK_SCHOLES_APP)
        .expect("compiles");
    let (rt, plugins) = runtime();
    // `vectors`: the prices read back into the component, as the native run below reads them.
    let mut j = job(
        "black_scholes_app",
        &[&n.to_string(), &seed.to_string(), "vectors"],
    );
    j.dir = Some(dir.clone());
    let (outcome, mut app_rt) = host.run(rt, &plugins, &app, &j);
    let outcome = outcome.expect("runs");
    assert_eq!(
        outcome.status,
        0,
        "stderr: {}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    let app_counts = counts(&mut app_rt);

    // The same program, native.
    let np = Numeric::new(
        Runtime::new(Config::default()).expect("rt"),
        artifacts::NUMERIC,
    )
    .expect("numeric");
    let uniform = |(low, high): (f64, f64), stream| {
        np.random_uniform(
            &[n],
            low,
            high,
            weft_examples::sub_seed(seed, stream),
            DType::F64,
        )
    };
    use weft_examples::black_scholes as bs;
    let (s, x, t) = (
        uniform(bs::S_RANGE, 0),
        uniform(bs::X_RANGE, 1),
        uniform(bs::T_RANGE, 2),
    );
    let r = np.full(&[], bs::RISK_FREE, DType::F64);
    let v = np.full(&[], bs::VOLATILITY, DType::F64);
    let (call, put) = bs::black_scholes(&s, &x, &t, &r, &v, bs::Cnd::Erf);
    let (call, put) = (call.to_vec().expect("call"), put.to_vec().expect("put"));
    let native_counts = np.runtime(counts);

    assert_eq!(
        std::fs::read(dir.join("call.f64")).expect("call.f64"),
        f64_bytes(&call)
    );
    assert_eq!(
        std::fs::read(dir.join("put.f64")).expect("put.f64"),
        f64_bytes(&put)
    );
    assert_eq!(
        app_counts, native_counts,
        "(tasks submitted, tasks run): component vs native"
    );
    assert!(
        app_counts.1 < app_counts.0,
        "the component's tasks fused: {app_counts:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs a hostile application with `limits` and returns its error; then checks that the
/// same runtime still serves a well-behaved application.
fn fails_alone(name: &str, bytes: &[u8], limits: AppLimits) -> String {
    let host = AppHost::new().expect("host");
    let app = host.compile(name, bytes).expect("compiles");
    let (rt, plugins) = runtime();
    let mut j = job(name, &[]);
    j.limits = limits;
    let (outcome, rt) = host.run(rt, &plugins, &app, &j);
    let message = match outcome {
        Err(e) => e.to_string(),
        Ok(o) => format!(
            "exit status {}, {} bytes of output",
            o.status,
            o.stdout.len()
        ),
    };
    let tiny = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    let (after, _) = host.run(rt, &plugins, &tiny, &job("tiny_add", &[]));
    assert_eq!(after.expect("the next job runs").status, 0);
    message
}

#[test]
fn an_endless_application_is_stopped_at_its_time_limit() {
    let limits = AppLimits {
        time: Duration::from_millis(200),
        ..AppLimits::default()
    };
    let m = fails_alone("hostile_spin", artifacts::APP_HOSTILE_SPIN, limits);
    assert!(
        m.contains("hostile_spin") && m.contains("time limit"),
        "{m}"
    );
}

#[test]
fn an_output_sink_sees_every_write_as_it_happens_up_to_the_bound() {
    use std::sync::{Arc, Mutex};
    use weft_apps::{OutputSink, Stream};
    let host = AppHost::new().expect("host");
    let (rt, plugins) = runtime();
    let seen = Arc::new(Mutex::new((Vec::new(), 0usize)));
    let sink = {
        let seen = seen.clone();
        OutputSink(Arc::new(move |stream, bytes: &[u8]| {
            let mut s = seen.lock().expect("lock");
            s.1 += 1;
            if stream == Stream::Stdout {
                s.0.extend_from_slice(bytes);
            }
        }))
    };
    // A flood cut at 10,000 bytes: the sink saw exactly what was captured, in many writes.
    let app = host
        .compile("hostile_output", artifacts::APP_HOSTILE_OUTPUT)
        .expect("compiles");
    let mut j = job("hostile_output", &[]);
    j.limits.output_bytes = 10_000;
    j.output = Some(sink.clone());
    let (outcome, rt) = host.run(rt, &plugins, &app, &j);
    let outcome = outcome.expect("runs");
    assert_eq!(outcome.stdout.len(), 10_000);
    {
        let s = seen.lock().expect("lock");
        assert_eq!(s.0, outcome.stdout);
        assert!(s.1 > 1, "{} writes", s.1);
    }
    let tiny = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    seen.lock().expect("lock").0.clear();
    let mut j = job("tiny_add", &[]);
    j.output = Some(sink);
    let (outcome, _) = host.run(rt, &plugins, &tiny, &j);
    let outcome = outcome.expect("runs");
    assert_eq!(seen.lock().expect("lock").0, outcome.stdout);
    assert!(!outcome.stdout.is_empty());
}

#[test]
fn a_job_cancelled_from_another_thread_stops_with_that_error() {
    use std::sync::Arc;
    let host = AppHost::new().expect("host");
    let app = host
        .compile("hostile_spin", artifacts::APP_HOSTILE_SPIN)
        .expect("compiles");
    let (rt, plugins) = runtime();
    let cancel = Arc::new(weft::CancelToken::new());
    let mut j = job("hostile_spin", &[]);
    j.cancel = Some(cancel.clone());
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        cancel.cancel();
    });
    let start = std::time::Instant::now();
    let (outcome, rt) = host.run(rt, &plugins, &app, &j);
    setter.join().expect("setter");
    let m = outcome.expect_err("cancelled").to_string();
    assert!(m.contains("hostile_spin") && m.contains("cancelled"), "{m}");
    // Its time limit (the default, 600 s) did not stop it.
    assert!(start.elapsed() < Duration::from_secs(60));
    let tiny = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    let (after, _) = host.run(rt, &plugins, &tiny, &job("tiny_add", &[]));
    assert_eq!(after.expect("the next job runs").status, 0);
}

#[test]
fn a_memory_bomb_is_stopped_at_its_cap() {
    let limits = AppLimits {
        memory_bytes: 64 << 20,
        ..AppLimits::default()
    };
    let m = fails_alone("hostile_memory", artifacts::APP_HOSTILE_MEMORY, limits);
    assert!(m.contains("hostile_memory") && m.contains("failed"), "{m}");
}

#[test]
fn an_output_flood_is_cut_at_its_bound() {
    let limits = AppLimits {
        output_bytes: 64 << 10,
        time: Duration::from_secs(20),
        ..AppLimits::default()
    };
    let m = fails_alone("hostile_output", artifacts::APP_HOSTILE_OUTPUT, limits);
    // WASI's exit carries success or failure only: the application's `exit(3)` is status 1.
    // The pipe took the bound's bytes, then refused the next write.
    assert_eq!(m, format!("exit status 1, {} bytes of output", 64 << 10));
}

#[test]
fn a_forged_handle_is_refused() {
    let m = fails_alone(
        "hostile_handle",
        artifacts::APP_HOSTILE_HANDLE,
        AppLimits::default(),
    );
    assert!(m.contains("hostile_handle") && m.contains("failed"), "{m}");
}

#[test]
fn an_application_whose_imports_no_plugin_serves_is_refused_by_name() {
    let host = AppHost::new().expect("host");
    let app = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    let rt = Runtime::new(Config::default()).expect("runtime");
    let (outcome, _) = host.run(rt, &[], &app, &job("tiny_add", &[]));
    let m = outcome.expect_err("refused").to_string();
    assert!(
        m.contains("tiny_add") && m.contains("weft:plugin/numeric"),
        "{m}"
    );
}

#[test]
fn bytes_that_are_not_a_component_are_refused_by_name() {
    let host = AppHost::new().expect("host");
    let m = host
        .compile("junk", b"not wasm")
        .expect_err("refused")
        .to_string();
    assert!(m.contains("junk") && m.contains("not a component"), "{m}");
}

#[test]
fn repeated_calls_are_replayed_and_give_the_native_bits() {
    let host = AppHost::new().expect("host");
    let app = host
        .compile("replay_loop", artifacts::APP_REPLAY_LOOP)
        .expect("compiles");
    let (rt, plugins) = runtime();
    let (outcome, _rt) = host.run(rt, &plugins, &app, &job("replay_loop", &[]));
    let outcome = outcome.expect("runs");
    assert_eq!(
        outcome.status,
        0,
        "stderr: {}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    // 202 calls: arange, 100 steps of two, the sum. The steps' calls repeat from the second
    // step on.
    assert_eq!(outcome.calls_made + outcome.calls_replayed, 202);
    assert!(
        outcome.calls_replayed >= 190,
        "replayed {} of 202",
        outcome.calls_replayed
    );
    let np = Numeric::new(
        Runtime::new(Config::default()).expect("rt"),
        artifacts::NUMERIC,
    )
    .expect("numeric");
    let mut x = np.arange(0.0, 8.0, 1.0, DType::F64);
    for _ in 0..100 {
        x = &x * 0.5 + 1.0;
    }
    let native = x.sum().item().expect("native sum");
    assert_eq!(
        String::from_utf8_lossy(&outcome.stdout).trim(),
        format!("{native:?}")
    );
}

#[test]
fn files_outside_the_job_directory_are_refused_and_nothing_escapes() {
    let base = std::env::temp_dir().join(format!("weft-apps-files-{}", std::process::id()));
    let dir = base.join("job");
    let _ = std::fs::remove_dir_all(&base);
    let (outcome, _) = run_in(
        &dir,
        "hostile_files",
        artifacts::APP_HOSTILE_FILES,
        AppLimits::default(),
    );
    let outcome = outcome.expect("runs");
    assert_eq!(outcome.status, 0);
    let out = String::from_utf8_lossy(&outcome.stdout).into_owned();
    assert_eq!(out.lines().count(), 6, "{out}");
    for l in out.lines() {
        assert!(l.contains("not a plain file name"), "{l}");
    }
    assert!(!base.join("escaped.f64").exists());
    assert!(!std::path::Path::new("/tmp/weft-escaped.f64").exists());
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0, "{out}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn an_application_filling_its_directory_is_stopped_at_its_quota() {
    let dir = std::env::temp_dir().join(format!("weft-apps-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let limits = AppLimits {
        dir_bytes: Some(16 << 20),
        // Without the check, it writes 256 MiB and spins to this limit.
        time: Duration::from_secs(30),
        ..AppLimits::default()
    };
    let (outcome, (host, rt, plugins)) =
        run_in(&dir, "hostile_disk", artifacts::APP_HOSTILE_DISK, limits);
    let m = outcome.expect_err("stopped").to_string();
    assert!(
        m.contains("hostile_disk") && m.contains(&format!("past its quota of {} bytes", 16 << 20)),
        "{m}"
    );
    assert!(weft_apps::dir_bytes(&dir) > 16 << 20);
    // The runtime serves the next job.
    let tiny = host
        .compile("tiny_add", artifacts::APP_TINY_ADD)
        .expect("compiles");
    let (after, _) = host.run(rt, &plugins, &tiny, &job("tiny_add", &[]));
    assert_eq!(after.expect("the next job runs").status, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs application `name` (`bytes`) with `limits` in directory `dir` (made here), on a new
/// runtime; its outcome, and the host, runtime and plugins for a next job.
fn run_in(
    dir: &std::path::Path,
    name: &str,
    bytes: &[u8],
    limits: AppLimits,
) -> (
    weft_apps::Result<weft_apps::JobOutcome>,
    (AppHost, Runtime, Vec<PluginId>),
) {
    std::fs::create_dir_all(dir).expect("dir");
    let host = AppHost::new().expect("host");
    let app = host.compile(name, bytes).expect("compiles");
    let (rt, plugins) = runtime();
    let mut j = job(name, &[]);
    j.dir = Some(dir.to_path_buf());
    j.limits = limits;
    let (outcome, rt) = host.run(rt, &plugins, &app, &j);
    (outcome, (host, rt, plugins))
}
