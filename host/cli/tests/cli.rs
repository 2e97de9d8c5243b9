//! The `weft` command, run as a user runs it.

use std::process::Command;

use weft_plugin_artifacts as artifacts;

fn weft(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("WEFT_CACHE", "0")
        .output()
        .expect("weft runs")
}

#[test]
fn run_prints_the_application_output_and_a_json_summary() {
    let out = weft(&["run", artifacts::APP_TINY_ADD_PATH]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "32");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().expect("a summary line");
    let summary: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(summary["status"], 0);
    assert_eq!(summary["tasks_submitted"], 4);
    assert_eq!(
        summary["tasks_executed"], 1,
        "the four tasks fused into one"
    );
}

#[test]
fn run_passes_arguments_and_the_directory_and_returns_the_application_status() {
    let dir = std::env::temp_dir().join(format!("weft-cli-bs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let d = dir.to_string_lossy().into_owned();
    let out = weft(&[
        "run",
        "--dir",
        &d,
        artifacts::APP_BLACK_SCHOLES_APP_PATH,
        "--",
        "1000",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dir.join("call.f64")).expect("call.f64").len(),
        8000
    );
    let bad = weft(&["run", artifacts::APP_BLACK_SCHOLES_APP_PATH, "--", "many"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("argument \"many\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_reports_a_hostile_application_and_exits_nonzero() {
    let out = weft(&["run", "--time-limit", "1", artifacts::APP_HOSTILE_SPIN_PATH]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("time limit"));
}

#[test]
fn inspect_names_a_plugin_and_an_application() {
    let out = weft(&["inspect", artifacts::NUMERIC_PATH]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("a plugin component") && text.contains("plugin: numeric"),
        "{text}"
    );
    assert!(text.contains("weft:plugin/numeric@0.1.0"), "{text}");
    let out = weft(&["inspect", artifacts::APP_TINY_ADD_PATH]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("an application component") && text.contains("contract: weft:plugin@0.1.0"),
        "{text}"
    );
    let bad = weft(&["inspect", "/nonexistent.wasm"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn doctor_reports_each_check() {
    let out = weft(&["doctor", "--json"]);
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let names: Vec<&str> = rows
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|r| r["check"].as_str())
        .collect();
    assert_eq!(names, ["cpu", "threads", "gpu", "mpi", "cache"]);
}
