//! Sandboxing: malformed components, trapping, runaway and memory-hungry plugins, and invalid
//! IR all give errors that name the plugin and the call, and the host (and the plugin) keep
//! working afterwards.

use std::time::{Duration, Instant};

use weft::{Config, Error, Fault, PluginError, PluginLimits, Runtime, Value};

const MISBEHAVE: &str = "weft:testing/misbehave#";

fn runtime() -> Runtime {
    let config = Config {
        component_cache: None,
        ..Config::default()
    };
    Runtime::new(config).expect("runtime starts")
}

fn limits() -> PluginLimits {
    PluginLimits {
        memory_bytes: 32 << 20,
        time: Duration::from_millis(200),
        ..PluginLimits::default()
    }
}

fn call(rt: &mut Runtime, p: weft::PluginId, f: &str, args: &[Value]) -> weft::Result<Vec<Value>> {
    rt.call(p, &format!("{MISBEHAVE}{f}"), args)
}

fn still_works(rt: &mut Runtime, p: weft::PluginId) {
    let out = call(rt, p, "ok", &[Value::U32(41)]).expect("plugin usable again");
    assert!(matches!(out.as_slice(), [Value::U32(42)]), "got {out:?}");
}

#[test]
fn garbage_bytes_are_rejected_with_a_clear_error() {
    let mut rt = runtime();
    let err = rt.load(b"definitely not wasm").unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, Error::Plugin(PluginError::Load { .. })),
        "{text}"
    );
    assert!(text.contains("not a valid Wasm component"), "{text}");
    // The runtime still loads a real plugin afterwards.
    rt.load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
}

#[test]
fn a_core_module_is_not_a_component() {
    let mut rt = runtime();
    // The smallest core module: magic and version 1.
    let err = rt.load(b"\0asm\x01\0\0\0").unwrap_err().to_string();
    assert!(err.contains("cannot load plugin"), "{err}");
}

#[test]
fn a_component_without_the_plugin_export_is_rejected() {
    let mut rt = runtime();
    // An empty component: magic, component-model version and layer.
    let err = rt.load(b"\0asm\x0d\0\x01\0").unwrap_err().to_string();
    assert!(err.contains("weft:plugin/plugin"), "{err}");
}

#[test]
fn a_trap_names_the_plugin_and_call_and_the_plugin_recovers() {
    let mut rt = runtime();
    let p = rt
        .load_with_limits(weft_plugin_artifacts::TEST_MISBEHAVE, limits())
        .expect("loads");
    let err = call(&mut rt, p, "trap", &[]).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            Error::Plugin(PluginError::Fault {
                fault: Fault::Panic,
                ..
            })
        ),
        "a panic is told apart by its trap code: {text}"
    );
    assert!(text.contains("plugin `misbehave`"), "{text}");
    assert!(text.contains("trap"), "{text}");
    still_works(&mut rt, p);
}

#[test]
fn a_runaway_plugin_is_stopped_at_its_time_limit() {
    let mut rt = runtime();
    let p = rt
        .load_with_limits(weft_plugin_artifacts::TEST_MISBEHAVE, limits())
        .expect("loads");
    let start = Instant::now();
    let err = call(&mut rt, p, "spin", &[]).unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(
            err,
            Error::Plugin(PluginError::Fault {
                fault: Fault::Timeout { limit },
                ..
            }) if limit == Duration::from_millis(200)
        ),
        "{err}"
    );
    let err = err.to_string();
    assert!(err.contains("plugin `misbehave`"), "{err}");
    assert!(err.contains("spin"), "{err}");
    assert!(err.contains("time limit of 200 ms"), "{err}");
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    still_works(&mut rt, p);
}

#[test]
fn a_memory_hog_hits_its_cap_and_the_plugin_recovers() {
    let mut rt = runtime();
    let p = rt
        .load_with_limits(weft_plugin_artifacts::TEST_MISBEHAVE, limits())
        .expect("loads");
    // Within the cap: fine.
    let ok = call(&mut rt, p, "hog", &[Value::U32(4)]).expect("4 MiB fits");
    assert!(matches!(ok.as_slice(), [Value::U64(n)] if *n == 4 << 20));
    let err = call(&mut rt, p, "hog", &[Value::U32(64)]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Plugin(PluginError::Fault {
                fault: Fault::MemoryCap { cap, desired },
                ..
            }) if cap == 32 << 20 && desired > cap
        ),
        "the cap is told apart by its error type: {err}"
    );
    let err = err.to_string();
    assert!(err.contains("plugin `misbehave`"), "{err}");
    assert!(err.contains("hog"), "{err}");
    assert!(err.contains("memory"), "{err}");
    still_works(&mut rt, p);
}

#[test]
fn invalid_ir_is_rejected_with_plugin_kernel_and_problem() {
    let mut rt = runtime();
    let p = rt
        .load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
    let out = call(
        &mut rt,
        p,
        "submit",
        &[Value::String("load-from-write-only".into())],
    )
    .expect("the call itself succeeds");
    let Some(Value::Result(Err(Some(message)))) = out.first() else {
        panic!("expected an error result, got {out:?}");
    };
    let Value::String(message) = message.as_ref() else {
        panic!("expected a string, got {message:?}");
    };
    assert!(
        message.contains("misbehave.load-from-write-only"),
        "{message}"
    );
    assert!(
        message.contains("write-only")
            || message.contains("cannot be read")
            || message.contains("load"),
        "{message}"
    );
    // A valid kernel from the same plugin still runs.
    let out = call(&mut rt, p, "submit", &[Value::String("fill-one".into())]).expect("ok");
    assert!(
        matches!(out.first(), Some(Value::Result(Ok(None)))),
        "{out:?}"
    );
    rt.flush().expect("runs");
    assert_eq!(rt.stats().exec.tasks_executed, 1);
}

#[test]
fn a_trap_while_producing_a_kernel_body_is_an_error_not_a_crash() {
    let mut rt = runtime();
    let p = rt
        .load_with_limits(weft_plugin_artifacts::TEST_MISBEHAVE, limits())
        .expect("loads");
    let out = call(
        &mut rt,
        p,
        "submit",
        &[Value::String("trap-in-kernel-body".into())],
    )
    .expect("the call itself succeeds");
    let text = format!("{out:?}");
    assert!(
        text.contains("trapped while producing kernel `trap-in-kernel-body`"),
        "{text}"
    );
    let out = call(&mut rt, p, "submit", &[Value::String("fill-one".into())]).expect("ok");
    assert!(
        matches!(out.first(), Some(Value::Result(Ok(None)))),
        "{out:?}"
    );
}

#[test]
fn unknown_exports_and_bad_arguments_are_usage_errors() {
    let mut rt = runtime();
    let p = rt
        .load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
    let err = call(&mut rt, p, "nope", &[]).unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
    let err = call(&mut rt, p, "ok", &[Value::String("x".into())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not fit"), "{err}");
    still_works(&mut rt, p);
}

#[test]
fn compiled_components_are_cached_on_disk() {
    let dir = std::env::temp_dir().join(format!("weft-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = |dir: &std::path::Path| Config {
        component_cache: Some(dir.to_path_buf()),
        ..Config::default()
    };
    let mut first = Runtime::new(config(&dir)).expect("runtime");
    first
        .load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
    assert_eq!(first.components_compiled(), 1);
    let mut second = Runtime::new(config(&dir)).expect("runtime");
    let p = second
        .load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
    assert_eq!(
        second.components_compiled(),
        0,
        "the second runtime reads the cache"
    );
    still_works(&mut second, p);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cache entries (`.cwasm` files) under `dir`.
fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect()
        })
        .unwrap_or_default()
}

/// Loads the misbehaving plugin in a fresh runtime with its cache under `dir`; returns how
/// many components it compiled, after checking that the plugin works.
fn load_cached(dir: &std::path::Path) -> u64 {
    let mut rt = Runtime::new(Config {
        component_cache: Some(dir.to_path_buf()),
        ..Config::default()
    })
    .expect("runtime");
    let p = rt
        .load(weft_plugin_artifacts::TEST_MISBEHAVE)
        .expect("loads");
    still_works(&mut rt, p);
    rt.components_compiled()
}

#[test]
fn the_disk_cache_is_private_and_a_tampered_entry_is_never_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir()
        .join(format!("weft-cache-private-{}", std::process::id()))
        .join("cache");
    let _ = std::fs::remove_dir_all(dir.parent().expect("a parent"));
    assert_eq!(load_cached(&dir), 1);
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("exists").permissions().mode();
    assert_eq!(mode(&dir) & 0o777, 0o700, "the directory is private");
    let written = entries(&dir);
    assert_eq!(
        written.len(),
        1,
        "one entry, no temporary left: {written:?}"
    );
    assert_eq!(mode(&written[0]) & 0o777, 0o600, "the entry is private");
    assert_eq!(load_cached(&dir), 0, "an intact entry is used");
    // Native code changed on disk (one byte in the middle): compiled again, never run.
    let mut bytes = std::fs::read(&written[0]).expect("readable");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&written[0], &bytes).expect("writable");
    assert_eq!(load_cached(&dir), 1, "a tampered entry is compiled again");
    assert_eq!(load_cached(&dir), 0, "and replaced by a good one");
    // A truncated entry likewise.
    let len = std::fs::metadata(&written[0]).expect("exists").len();
    std::fs::File::options()
        .write(true)
        .open(&written[0])
        .and_then(|f| f.set_len(len / 3))
        .expect("truncated");
    assert_eq!(load_cached(&dir), 1, "a truncated entry is compiled again");
    // A directory others may write into is not used: every load compiles.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(load_cached(&dir), 1);
    assert_eq!(
        load_cached(&dir),
        1,
        "no entry read from a shared directory"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("a parent"));
}

/// `component` with every `weft:plugin/...@0.1.0` name changed to `version` (of the same
/// length): the component a plugin built against another version of the contract would be.
fn with_contract_version(component: &[u8], version: &str) -> Vec<u8> {
    let (from, to) = (b"@0.1.0".as_slice(), format!("@{version}"));
    assert_eq!(from.len(), to.len(), "the patch keeps lengths");
    let mut out = component.to_vec();
    let mut patched = 0;
    for i in 0..out.len().saturating_sub(from.len()) {
        let name_start = i.saturating_sub(24);
        let names_contract = out[name_start..i].windows(12).any(|w| w == b"weft:plugin/");
        if &out[i..i + from.len()] == from && names_contract {
            out[i..i + from.len()].copy_from_slice(to.as_bytes());
            patched += 1;
        }
    }
    assert!(patched > 0, "the component names the contract's version");
    out
}

#[test]
fn a_plugin_built_for_an_incompatible_contract_version_is_refused_naming_the_import() {
    let mut rt = runtime();
    for version in ["0.2.0", "1.1.0"] {
        let other = with_contract_version(weft_plugin_artifacts::STATS, version);
        let err = rt.load(&other).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::Plugin(PluginError::Load { .. })),
            "{text}"
        );
        assert!(
            text.contains(&format!("weft:plugin/host@{version}")),
            "{version}: {text}"
        );
    }
    // A semver-compatible version (0.1.x) links against the host's 0.1.0 and works.
    let patch = with_contract_version(weft_plugin_artifacts::STATS, "0.1.9");
    let stats = rt.load(&patch).expect("0.1.9 is compatible with 0.1.0");
    let x = rt
        .store_from_bytes(
            &[2],
            weft::DType::F64,
            &[1f64.to_le_bytes(), 3f64.to_le_bytes()].concat(),
        )
        .expect("a store");
    let m = rt
        .invoke(stats, "plugin:stats/ops#mean", &[Value::Store(x)])
        .expect("mean runs")
        .expect("a store");
    let Value::Store(m) = m else { panic!("{m:?}") };
    assert_eq!(rt.read_bytes(&m).expect("read"), 2f64.to_le_bytes());
}

/// The store a dynamic call's `result<store, error>` holds.
fn returned_store(out: &[Value]) -> weft::StoreHandle {
    match out {
        [Value::Result(Ok(Some(v)))] => match &**v {
            Value::Store(h) => h.clone(),
            other => panic!("not a store: {other:?}"),
        },
        other => panic!("not an ok result: {other:?}"),
    }
}

#[test]
fn a_store_lent_inside_a_variant_is_given_back_when_the_call_returns() {
    // `numeric.binary` takes its arrays inside `operand` variants: the handles the dynamic
    // API makes to lend them must be dropped after each call, as top-level ones are. They
    // were once left in the plugin's table (revoked, but never removed), which grew with
    // every call, and every call's end walked it: a call cost 8 us at first and 43 us after
    // 10,000 (application components make every call this way).
    let mut rt = runtime();
    let np = rt
        .load(weft_plugin_artifacts::NUMERIC)
        .expect("numeric loads");
    let baseline = rt.memory().0;
    let zeros = rt
        .call(
            np,
            "weft:plugin/numeric@0.1.0#zeros",
            &[Value::List(vec![Value::U64(4)]), Value::Enum("f64".into())],
        )
        .expect("zeros");
    let a = returned_store(&zeros);
    drop(zeros);
    let array = || Value::Variant("array".into(), Some(Box::new(Value::Store(a.clone()))));
    for _ in 0..50 {
        let out = rt
            .call(
                np,
                "weft:plugin/numeric@0.1.0#binary",
                &[Value::Enum("add".into()), array(), array()],
            )
            .expect("binary");
        drop(returned_store(&out));
    }
    let held = rt
        .with_plugin(np, "count handles", |store, _, _| {
            Ok(store.data_mut().handles.iter_mut().count())
        })
        .expect("the plugin's table");
    assert_eq!(
        held, 0,
        "no entry is left in the plugin's table after its calls returned"
    );
    rt.synchronize().expect("runs");
    drop(a);
    rt.flush().expect("flushes");
    assert_eq!(
        rt.memory().0,
        baseline,
        "every store is freed once the application dropped its handles"
    );
}
