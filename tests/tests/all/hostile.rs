//! A hostile plugin against the host's own code, where wasmtime's limits do not reach: tilings
//! and launches at the integer limits, panics below a call, handles kept past the call that
//! lent them, writes through read-only handles, memory bombs, data races, huge frames and
//! oversized kernels. Each attack gets an error that names the plugin and the problem, and
//! the host and the plugin keep working.

use std::time::Duration;

use weft::{Config, Error, Fault, PluginError, PluginLimits, Runtime, Value};

const MISBEHAVE: &str = "weft:testing/misbehave#";

fn runtime_with(config: Config) -> Runtime {
    Runtime::new(Config {
        component_cache: None,
        ..config
    })
    .expect("runtime starts")
}

fn runtime() -> Runtime {
    runtime_with(Config::default())
}

fn load(rt: &mut Runtime, limits: PluginLimits) -> weft::PluginId {
    rt.load_with_limits(weft_plugin_artifacts::TEST_MISBEHAVE, limits)
        .expect("loads")
}

fn call(rt: &mut Runtime, p: weft::PluginId, f: &str, args: &[Value]) -> weft::Result<Vec<Value>> {
    rt.call(p, &format!("{MISBEHAVE}{f}"), args)
}

/// The plugin's own `result` from a call's return values: the payload or the message.
fn outcome(out: Vec<Value>) -> Result<Option<Value>, String> {
    match out.into_iter().next() {
        Some(Value::Result(Ok(v))) => Ok(v.map(|v| *v)),
        Some(Value::Result(Err(Some(e)))) => match *e {
            Value::String(m) => Err(m),
            other => panic!("an error that is not a string: {other:?}"),
        },
        other => panic!("not a result: {other:?}"),
    }
}

/// The `f64`s of a `list<u8>` payload.
fn f64s(v: Option<Value>) -> Vec<f64> {
    let Some(Value::List(bytes)) = v else {
        panic!("not a list: {v:?}")
    };
    let bytes: Vec<u8> = bytes
        .into_iter()
        .map(|b| match b {
            Value::U8(b) => b,
            other => panic!("not a byte: {other:?}"),
        })
        .collect();
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The plugin's own result of `run(key, n)`: the task of kernel `key` over a new store of `n`
/// elements, read back.
fn run(rt: &mut Runtime, p: weft::PluginId, key: &str, n: u64) -> Result<Option<Value>, String> {
    outcome(
        call(rt, p, "run", &[Value::String(key.into()), Value::U64(n)]).expect("the call returns"),
    )
}

/// The plugin's own result of `submit(key)`: the task of kernel `key` submitted.
fn submit(rt: &mut Runtime, p: weft::PluginId, key: &str) -> Result<Option<Value>, String> {
    outcome(call(rt, p, "submit", &[Value::String(key.into())]).expect("the call returns"))
}

fn still_works(rt: &mut Runtime, p: weft::PluginId) {
    let out = call(rt, p, "ok", &[Value::U32(41)]).expect("plugin usable again");
    assert!(matches!(out.as_slice(), [Value::U32(42)]), "got {out:?}");
    let ones = run(rt, p, "fill-one", 5).expect("fills");
    assert_eq!(f64s(ones), vec![1.0; 5], "tasks still run");
}

/// What `tiled(tile, offset, points)` must give: element `j` of 8 is one when some point
/// `p < points` has `offset + tile p <= j < offset + tile (p + 1)`, in exact arithmetic.
fn tiled_reference(tile: u64, offset: i64, points: u64) -> Vec<f64> {
    (0..8i128)
        .map(|j| {
            let (tile, offset) = (i128::from(tile), i128::from(offset));
            let covered = tile > 0
                && j >= offset
                && (j - offset) / tile < i128::from(points)
                && (j - offset) % tile < tile;
            if covered { 1.0 } else { 0.0 }
        })
        .collect()
}

#[test]
fn tilings_and_launches_at_the_integer_limits_give_exact_answers_or_errors() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let cases: [(u64, i64, u64); 14] = [
        (1 << 63, 0, 2),
        // Saturating arithmetic would end this one tile at -1: it covers the whole store.
        (u64::MAX, i64::MIN, 1),
        (u64::MAX, 0, 2),
        (u64::MAX, i64::MIN, 3),
        (u64::MAX, i64::MAX, 2),
        (1, i64::MAX, 2),
        (1, i64::MIN, 2),
        (1 << 62, 1 << 62, 4),
        (1 << 62, -(1 << 62), 2),
        (4, -4, 3),
        (3, -1, 4),
        (2, i64::MAX - 1, 5),
        (0, 0, 2),
        (1, -7, 1 << 20),
    ];
    for (tile, offset, points) in cases {
        let out = call(
            &mut rt,
            p,
            "tiled",
            &[Value::U64(tile), Value::S64(offset), Value::U64(points)],
        )
        .unwrap_or_else(|e| panic!("tile {tile}, offset {offset}, {points} points: {e}"));
        let got = outcome(out)
            .unwrap_or_else(|e| panic!("tile {tile}, offset {offset}, {points} points: {e}"));
        assert_eq!(
            f64s(got),
            tiled_reference(tile, offset, points),
            "tile {tile}, offset {offset}, {points} points"
        );
    }
    // Launch domains past the limit, or whose point count overflows, are refused at submit.
    for domain in [
        vec![u64::MAX],
        vec![1 << 32, 1 << 32, 1 << 32],
        vec![weft::Limits::default().launch_points + 1],
    ] {
        let list = Value::List(domain.iter().map(|&e| Value::U64(e)).collect());
        let err = outcome(call(&mut rt, p, "launch", &[list]).expect("the call returns"))
            .expect_err("refused");
        assert!(
            err.contains("misbehave") && err.contains("points, more than the limit"),
            "{domain:?}: {err}"
        );
    }
    let err =
        outcome(call(&mut rt, p, "many-args", &[Value::U32(5000)]).expect("the call returns"))
            .expect_err("refused");
    assert!(
        err.contains("5000 store arguments, more than the limit"),
        "{err}"
    );
    still_works(&mut rt, p);
}

#[test]
fn a_panic_below_a_plugin_call_is_caught_and_the_runtime_stays_usable() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let err = rt
        .with_plugin(p, "probe", |_, _, _| -> weft::wasmtime::Result<()> {
            panic!("a bug below the call")
        })
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Plugin(PluginError::Fault {
                fault: Fault::HostPanic(m),
                ..
            }) if m == "a bug below the call"
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("plugin `misbehave`, call `probe`"), "{text}");
    still_works(&mut rt, p);
}

/// A store of `n` `f64`s, all `value`, made by the application.
fn app_store(rt: &mut Runtime, n: usize, value: f64) -> weft::StoreHandle {
    let bytes: Vec<u8> = (0..n).flat_map(|_| value.to_le_bytes()).collect();
    rt.store_from_bytes(&[n as u64], weft::DType::F64, &bytes)
        .expect("a store")
}

fn read_f64s(rt: &mut Runtime, s: &weft::StoreHandle) -> Vec<f64> {
    rt.read_bytes(s)
        .expect("read")
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

#[test]
fn a_view_of_a_lent_store_is_revoked_when_the_call_returns() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let secret = app_store(&mut rt, 6, 7.0);
    outcome(call(&mut rt, p, "keep", &[Value::Store(secret.clone())]).expect("keeps"))
        .expect("a view was made during the call");
    // Later, with nothing lent, the plugin tries its kept view.
    let err = call(&mut rt, p, "poke", &[]).expect_err("the kept view is revoked");
    let text = err.to_string();
    assert!(
        text.contains("plugin `misbehave`") && text.contains("revoked store handle"),
        "{text}"
    );
    assert_eq!(
        read_f64s(&mut rt, &secret),
        vec![7.0; 6],
        "the application's array is untouched"
    );
    still_works(&mut rt, p);
    // The revoked view's count was given back: dropping the application's handle frees the
    // store.
    let before = rt.memory().0;
    drop(secret);
    rt.flush().expect("flushes");
    assert!(rt.memory().0 < before, "the store is freed");
}

#[test]
fn a_task_may_not_write_a_store_lent_read_only() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let a = app_store(&mut rt, 4, 2.0);
    let err = outcome(
        call(&mut rt, p, "write-into", &[Value::ReadOnly(a.clone())]).expect("the call returns"),
    )
    .expect_err("refused");
    assert!(
        err.contains("misbehave.fill-one") || err.contains("fill-one"),
        "{err}"
    );
    assert!(err.contains("read-only"), "{err}");
    assert_eq!(read_f64s(&mut rt, &a), vec![2.0; 4]);
    // Lent writable, the same call writes it.
    outcome(call(&mut rt, p, "write-into", &[Value::Store(a.clone())]).expect("returns"))
        .expect("writes");
    assert_eq!(read_f64s(&mut rt, &a), vec![1.0; 4]);
}

#[test]
fn a_memory_bomb_stops_at_the_plugins_quota_and_the_runtimes() {
    let quota = 1 << 20;
    let mut rt = runtime();
    let p = load(
        &mut rt,
        PluginLimits {
            store_bytes: quota,
            ..PluginLimits::default()
        },
    );
    // 64 KiB stores: 16 fit the quota, the 17th does not.
    let bomb = |rt: &mut Runtime, shape: u64, count: u32| {
        let out = call(
            rt,
            p,
            "bomb",
            &[Value::List(vec![Value::U64(shape)]), Value::U32(count)],
        )
        .expect("returns");
        match out.as_slice() {
            [Value::Tuple(t)] => match t.as_slice() {
                [Value::U32(made), Value::String(why)] => (*made, why.clone()),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    };
    let (made, why) = bomb(&mut rt, 8192, 100);
    assert_eq!(made, 16, "{why}");
    assert!(
        why.contains("plugin `misbehave`") && why.contains("over its quota of 1048576 bytes"),
        "{why}"
    );
    // One store past any machine's memory is refused before anything is allocated.
    let (made, why) = bomb(&mut rt, 1 << 40, 1);
    assert_eq!(made, 0);
    assert!(why.contains("quota"), "{why}");
    // Dropping what it kept gives the quota back.
    call(&mut rt, p, "forget", &[]).expect("forgets");
    rt.flush().expect("flushes");
    let (made, _) = bomb(&mut rt, 8192, 4);
    assert_eq!(made, 4);
    call(&mut rt, p, "forget", &[]).expect("forgets");

    // The runtime's own quota (the tenant's) holds for every plugin and the application.
    let mut rt = runtime_with(Config {
        limits: weft::Limits {
            store_bytes: 256 << 10,
            ..weft::Limits::default()
        },
        ..Config::default()
    });
    let p = load(&mut rt, PluginLimits::default());
    let out = call(
        &mut rt,
        p,
        "bomb",
        &[Value::List(vec![Value::U64(8192)]), Value::U32(100)],
    )
    .expect("returns");
    let text = format!("{out:?}");
    assert!(text.contains("U32(4)"), "{text}");
    assert!(
        text.contains("the runtime") && text.contains("quota"),
        "{text}"
    );
    let err = rt
        .store_from_bytes(&[8192], weft::DType::F64, &[0; 65536])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the runtime") && err.contains("quota"),
        "{err}"
    );
}

#[test]
fn a_data_race_in_a_parallel_loop_is_rejected_but_a_reduction_is_not() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let err = submit(&mut rt, p, "race").expect_err("refused");
    assert!(err.contains("misbehave.race"), "{err}");
    assert!(err.contains("data race"), "{err}");
    submit(&mut rt, p, "sum-into-first").expect("a reduction is not a race");
    rt.flush().expect("runs");
    still_works(&mut rt, p);
}

#[test]
fn kernels_past_the_size_limits_are_refused_where_they_enter() {
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let err = submit(&mut rt, p, "many-params").expect_err("refused");
    assert!(err.contains("misbehave.many-params"), "{err}");
    assert!(err.contains("parameters, more than the limit"), "{err}");
    // A kernel that keeps tens of thousands of values live at once (a huge stack frame, and
    // minutes of register allocation) is refused before it is compiled.
    let err = run(&mut rt, p, "huge-frame", 4).expect_err("refused");
    assert!(err.contains("misbehave.huge-frame"), "{err}");
    assert!(
        err.contains("values live at once, more than the limit"),
        "{err}"
    );
    still_works(&mut rt, p);
}

#[test]
fn a_runaway_kernel_is_cancelled_at_the_kernel_time_limit() {
    let mut rt = runtime_with(Config {
        limits: weft::Limits {
            kernel_time: Some(Duration::from_millis(300)),
            ..weft::Limits::default()
        },
        ..Config::default()
    });
    let p = load(&mut rt, PluginLimits::default());
    let start = std::time::Instant::now();
    let err = run(&mut rt, p, "forever", 4).expect_err("cancelled");
    assert!(err.contains("misbehave.forever"), "{err}");
    assert!(err.contains("time limit of 300 ms"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    still_works(&mut rt, p);
}

#[test]
fn a_cancelled_job_stops_its_running_kernel_and_the_runtime_goes_on() {
    // A kernel time limit far past the cancel, so that only the cancel can stop the kernel
    // in time: without it the error would name the limit.
    let mut rt = runtime_with(Config {
        limits: weft::Limits {
            kernel_time: Some(Duration::from_secs(60)),
            ..weft::Limits::default()
        },
        ..Config::default()
    });
    let p = load(&mut rt, PluginLimits::default());
    let token = std::sync::Arc::new(weft::CancelToken::new());
    rt.set_cancel(Some(token.clone()));
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        token.cancel();
    });
    let err = run(&mut rt, p, "forever", 4).expect_err("cancelled");
    canceller.join().expect("the canceller");
    assert!(err.contains("misbehave.forever"), "{err}");
    assert!(err.contains(weft::CANCELLED_BY_JOB), "{err}");
    assert!(!err.contains("time limit"), "{err}");
    // The next job's runtime: no cancel, tasks run.
    rt.set_cancel(None);
    still_works(&mut rt, p);
}

#[test]
fn launches_of_a_cancelled_job_are_refused_and_a_new_job_runs() {
    // No kernel time limit: the back end has no watchdog, and refuses the launch itself.
    let mut rt = runtime();
    let p = load(&mut rt, PluginLimits::default());
    let token = std::sync::Arc::new(weft::CancelToken::new());
    token.cancel();
    rt.set_cancel(Some(token));
    let err = run(&mut rt, p, "fill-one", 5).expect_err("refused");
    assert!(err.contains(weft::CANCELLED_BY_JOB), "{err}");
    rt.set_cancel(Some(std::sync::Arc::new(weft::CancelToken::new())));
    still_works(&mut rt, p);
}
