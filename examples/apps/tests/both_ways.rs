//! One application source built two ways gives the same output bytes: `black_scholes_app`
//! run as its native binary, and as a component under `weft-apps`.

use std::path::PathBuf;
use std::process::Command;

use weft::{Config, Runtime};
use weft_apps::{AppHost, Job};
use weft_plugin_artifacts as artifacts;

fn fresh_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-both-ways-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// The JSON line without its `seconds` field.
fn without_time(line: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON line");
    if let Some(o) = v.as_object_mut() {
        o.remove("seconds");
    }
    v.to_string()
}

#[test]
fn black_scholes_native_and_component_write_the_same_bytes() {
    let args = ["20000", "11"];
    let native_dir = fresh_dir("native");
    let native = Command::new(env!("CARGO_BIN_EXE_black_scholes_app"))
        .args(args)
        .current_dir(&native_dir)
        .env("WEFT_CACHE", "0")
        .output()
        .expect("the native build runs");
    assert!(
        native.status.success(),
        "{}",
        String::from_utf8_lossy(&native.stderr)
    );

    let component_dir = fresh_dir("component");
    let host = AppHost::new().expect("host");
    let app = host
        .compile("black_scholes_app", artifacts::APP_BLACK_SCHOLES_APP)
        .expect("compiles");
    let mut rt = Runtime::new(Config::default()).expect("runtime");
    let plugins = vec![rt.load(artifacts::NUMERIC).expect("numeric")];
    let job = Job {
        name: "black_scholes_app".into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        dir: Some(component_dir.clone()),
        capture: true,
        ..Job::default()
    };
    let (outcome, _rt) = host.run(rt, &plugins, &app, &job);
    let outcome = outcome.expect("the component runs");
    assert_eq!(
        outcome.status,
        0,
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );

    for file in ["call.f64", "put.f64"] {
        let a = std::fs::read(native_dir.join(file)).expect("native output");
        let b = std::fs::read(component_dir.join(file)).expect("component output");
        assert_eq!(a.len(), 20_000 * 8);
        assert!(a == b, "{file}: the two builds differ");
    }
    assert_eq!(
        without_time(&String::from_utf8_lossy(&native.stdout)),
        without_time(&String::from_utf8_lossy(&outcome.stdout))
    );
    let _ = std::fs::remove_dir_all(&native_dir);
    let _ = std::fs::remove_dir_all(&component_dir);
}
