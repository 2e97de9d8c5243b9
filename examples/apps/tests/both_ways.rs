//! One application source built two ways gives the same output bytes: each program of
//! `examples/apps` that builds both ways, run as its native binary and as a component under
//! `weft-apps`, with the same arguments, writes the same files and prints the same JSON line
//! (less its time).

use std::path::{Path, PathBuf};
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

/// Runs `native` (a binary of this package) and `component` (its component build, named
/// `name`) with `args`, each in a directory of its own, with the numeric and sparse plugins;
/// requires the same bytes in each of `files` and the same JSON line less its time. Returns
/// the native run's files, for checks of their values.
fn same_both_ways(
    name: &str,
    native: &str,
    component: &[u8],
    args: &[&str],
    files: &[&str],
) -> Vec<Vec<u8>> {
    let tag = format!("{name}-{}", args.join("-"));
    let native_dir = fresh_dir(&format!("{tag}-native"));
    let ran = Command::new(native)
        .args(args)
        .current_dir(&native_dir)
        .env("WEFT_CACHE", "0")
        .output()
        .expect("the native build runs");
    assert!(
        ran.status.success(),
        "{name} native: {}",
        String::from_utf8_lossy(&ran.stderr)
    );

    let component_dir = fresh_dir(&format!("{tag}-component"));
    let host = AppHost::new().expect("host");
    let app = host.compile(name, component).expect("compiles");
    let mut rt = Runtime::new(Config::default()).expect("runtime");
    let plugins = vec![
        rt.load(artifacts::NUMERIC).expect("numeric"),
        rt.load(artifacts::SPARSE).expect("sparse"),
    ];
    let job = Job {
        name: name.into(),
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
        "{name} component: {}",
        String::from_utf8_lossy(&outcome.stderr)
    );

    let read = |dir: &Path, file: &str| {
        std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{name}: {file}: {e}"))
    };
    let mut outputs = Vec::new();
    for file in files {
        let (a, b) = (read(&native_dir, file), read(&component_dir, file));
        assert!(!a.is_empty(), "{name}: {file} is empty");
        assert!(a == b, "{name} {args:?}: {file}: the two builds differ");
        outputs.push(a);
    }
    assert_eq!(
        without_time(&String::from_utf8_lossy(&ran.stdout)),
        without_time(&String::from_utf8_lossy(&outcome.stdout)),
        "{name} {args:?}: the JSON lines differ"
    );
    let _ = std::fs::remove_dir_all(&native_dir);
    let _ = std::fs::remove_dir_all(&component_dir);
    outputs
}

/// Little-endian `f64`s.
fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

#[test]
fn black_scholes_native_and_component_write_the_same_bytes() {
    // Written by the host (`tofile`), and read back into the program and written by it.
    let [files, vectors] = ["files", "vectors"].map(|mode| {
        same_both_ways(
            "black_scholes_app",
            env!("CARGO_BIN_EXE_black_scholes_app"),
            artifacts::APP_BLACK_SCHOLES_APP,
            &["20000", "11", mode],
            &["call.f64", "put.f64"],
        )
    });
    assert_eq!(files[0].len(), 20_000 * 8);
    assert_eq!(files, vectors, "the two modes write the same prices");
}

/// The residual norms a solve wrote: it converged to the solver's tolerance, after more than
/// a few iterations (so the loop, not just its set-up, ran both ways).
fn check_converged(method: &str, residuals: &[u8]) {
    let r = f64s(residuals);
    let (first, last) = (r[0], r[r.len() - 1]);
    assert!(r.len() > 5, "{method}: {} residuals", r.len());
    assert!(last <= 1e-8 * first, "{method}: |r| {last} from {first}");
}

#[test]
fn krylov_solvers_native_and_component_write_the_same_bytes() {
    for method in ["cg", "bicgstab", "gmg"] {
        let out = same_both_ways(
            "krylov_app",
            env!("CARGO_BIN_EXE_krylov_app"),
            artifacts::APP_KRYLOV_APP,
            &[method, "31", "5"],
            &["x.f64", "residuals.f64"],
        );
        assert_eq!(out[0].len(), 31 * 31 * 8);
        check_converged(method, &out[1]);
    }
}

#[test]
fn channel_flow_native_and_component_write_the_same_bytes() {
    let out = same_both_ways(
        "cfd_app",
        env!("CARGO_BIN_EXE_cfd_app"),
        artifacts::APP_CFD_APP,
        &["33", "10", "4", "7"],
        &["u.f64", "v.f64", "p.f64", "udiff.f64"],
    );
    assert_eq!(out[0].len(), 33 * 33 * 8);
    // The pressure iteration computed something: p is not zero.
    assert!(f64s(&out[2]).iter().any(|&p| p != 0.0), "p stayed zero");
    assert_eq!(f64s(&out[3]).len(), 4);
}

#[test]
fn typed_calls_native_and_component_write_the_same_lines() {
    let out = same_both_ways(
        "typed_calls",
        env!("CARGO_BIN_EXE_typed_calls"),
        artifacts::APP_TYPED_CALLS,
        &[],
        &["lines.txt"],
    );
    let text = String::from_utf8_lossy(&out[0]).into_owned();
    // Values checked here against plain Rust: x = 1..6, y = linspace(-1, 1, 6) (only its
    // signs and what truncates the same whichever way its steps round).
    let x: Vec<f64> = (1..=6).map(f64::from).collect();
    let y: Vec<f64> = (0..6).map(|i| -1.0 + 2.0 * f64::from(i) / 5.0).collect();
    let expect = |name: &str, v: Vec<f64>| {
        let want = format!("{name}: {v:?}\n");
        assert!(text.contains(&want), "{want} in\n{text}");
    };
    expect("rsub_scalar", x.iter().map(|a| 2.0 - a).collect());
    expect("pow_int", x.iter().map(|a| a * a).collect());
    expect(
        "select",
        y.iter()
            .zip(&x)
            .map(|(&b, &a)| if b > 0.0 { a } else { -1.0 })
            .collect(),
    );
    expect("assign_scalar", vec![4.5; 6]);
    expect("sum", vec![21.0]);
    expect(
        "astype",
        y.iter().map(|b| f64::from((b * 2.5) as i32)).collect(),
    );
    expect("matvec", vec![8.0, 26.0]);
    expect("matmul", vec![10.0, 13.0, 28.0, 40.0]);
    expect("fromfile", x.iter().map(|a| a * 0.5).collect());
    assert!(text.contains("refused: refused\n"), "{text}");
    assert_eq!(text.lines().count(), 22, "{text}");
}
