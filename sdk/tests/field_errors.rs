//! A `kernel!` field whose type cannot go into a key is a compile error at that field: one
//! error, whose message says why and whose span is the field's type (not the whole macro).
//! The test compiles a small crate against this build's `weft-sdk`, with the `rustc` of the
//! `cargo` that built it.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = r#"use weft_sdk::ir::DType;

#[derive(Clone, Debug, PartialEq)]
pub struct Mode;

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mode")
    }
}

weft_sdk::kernel! {
    struct Smooth { rank: u32, dtype: DType, mode: Mode }
    stores { a: (dtype, rank, Read), out: (dtype, rank, Write) }
    body(k) {}
}

fn main() {}
"#;

/// The newest `libweft_sdk-*.rlib` beside this test binary (in `target/<profile>/deps`).
fn sdk_rlib(deps: &Path) -> PathBuf {
    let entries = std::fs::read_dir(deps).expect("the deps directory");
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libweft_sdk-") && n.ends_with(".rlib"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("this build's weft-sdk rlib")
}

#[test]
fn a_field_that_cannot_go_into_a_key_is_an_error_at_that_field() {
    let exe = std::env::current_exe().expect("the test binary");
    let deps = exe.parent().expect("the deps directory");
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("field-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let file = dir.join("smooth.rs");
    std::fs::write(&file, SOURCE).expect("the source");
    let rustc = Path::new(env!("CARGO")).with_file_name("rustc");
    let out = Command::new(&rustc)
        .args([
            "--edition=2024",
            "--error-format=short",
            "--emit=metadata",
            "--crate-type=bin",
        ])
        .arg("--extern")
        .arg(format!("weft_sdk={}", sdk_rlib(deps).display()))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--out-dir")
        .arg(&dir)
        .arg(&file)
        .output()
        .expect("rustc runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "the crate compiled:\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error")).collect();
    assert_eq!(errors.len(), 1, "one error:\n{stderr}");
    // `smooth.rs:LINE:COL: error[E0277]: ...`, at `Mode` in `mode: Mode`.
    let line = SOURCE
        .lines()
        .position(|l| l.contains("mode: Mode"))
        .expect("the field")
        + 1;
    let column = SOURCE
        .lines()
        .nth(line - 1)
        .and_then(|l| l.find("Mode }"))
        .expect("its type")
        + 1;
    let at =
        format!("smooth.rs:{line}:{column}: error[E0277]: `Mode` cannot be a field of a `kernel!`");
    assert!(errors[0].contains(&at), "expected {at}, got:\n{stderr}");
}
