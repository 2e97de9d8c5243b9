//! The SDK's template, as a plugin author uses it: `weft_plugin_build::new_plugin` writes a
//! crate outside this workspace, and that crate's own `cargo test` builds it into a
//! component with `weft-plugin-build`, loads it beside numeric with the SDK's test harness,
//! checks that its operations fuse with numeric's and compares them with plain Rust.
//!
//! The nested `cargo test` runs offline against this workspace's lock file and target
//! directory, with this workspace's profile settings, so it compiles only what differs (the
//! template crate, and the host crates whose features differ). When this build has MPI, the
//! nested one asks for it too (`weft-plugin-test/mpi`): MPI's bindings are generated with a
//! `syn` that has more features, and proc-macros built with that `syn` sit under Cranelift, so
//! a nested build without MPI compiled wasmtime and Cranelift again (about 400 s of CI). It
//! asks for `weft-plugin-test/ndarray` too, since this crate builds `weft` with `ndarray`.

use std::path::{Path, PathBuf};
use std::process::Command;

use weft_plugin_build::new_plugin;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// This workspace's release profile as `cargo` arguments for a build of another workspace:
/// line tables for this workspace's crates, none for the rest. Without the second part the
/// nested build compiled wasmtime and Cranelift again with line tables (the outer build's
/// copies have none), most of this test's time.
fn release_profile(workspace: &Path) -> Vec<String> {
    let out = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(["metadata", "--format-version=1", "--no-deps", "--offline"])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let packages = meta["packages"].as_array().expect("a package list");
    let mut args = vec![
        "--release".to_string(),
        "--config=profile.release.package.\"*\".debug=false".to_string(),
    ];
    for p in packages {
        let name = p["name"].as_str().expect("a package name");
        args.push(format!(
            "--config=profile.release.package.{name}.debug=\"line-tables-only\""
        ));
    }
    assert!(args.len() > 10, "the workspace's packages: {args:?}");
    args
}

#[test]
fn a_plugin_from_the_template_passes_its_own_test_in_the_real_host() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target_dir = tmp.parent().expect("the target directory");
    let dir = tmp
        .join(format!("template-{}", std::process::id()))
        .join("my-stats");
    let _ = std::fs::remove_dir_all(&dir);
    let manifest =
        new_plugin(&dir, "my-stats", &workspace().join("sdk")).expect("the template is written");
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock file");

    let mut cargo = Command::new(option_env!("CARGO").unwrap_or("cargo"));
    cargo
        .arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--offline")
        .env("CARGO_NET_OFFLINE", "true");
    // The host's features as this build has them (the tests crate turns on `weft/ndarray`).
    if cfg!(feature = "mpi") {
        cargo.args([
            "--features",
            "weft-plugin-test/mpi,weft-plugin-test/ndarray",
        ]);
    } else {
        cargo.args(["--features", "weft-plugin-test/ndarray"]);
    }
    // This workspace's profile settings, so that the host's crates already built are reused.
    if cfg!(debug_assertions) {
        cargo.arg("--config=profile.dev.package.\"*\".opt-level=1");
    } else {
        cargo.args(release_profile(&workspace()));
    }
    let out = cargo.output().expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the template's test failed:\n{stdout}\n{stderr}"
    );
    // Both of the template's tests ran and passed (not filtered out, not ignored).
    assert!(
        stdout.contains("test scale_and_total_match_plain_rust_and_fuse_with_numeric ... ok")
            && stdout.contains("test errors_name_the_plugin_and_the_call ... ok")
            && stdout.contains("test result: ok. 2 passed"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp dir"));
}
