//! The PTX filetest harness: runs every `tests/filetests/*.ir` file.
//!
//! A file is one kernel in `weft-ir`'s text form, headed by comment lines that hold
//! directives, `; NAME: VALUE`. The kernel is validated and math-lowered, as the runtime hands
//! kernels to back ends, then emitted as PTX.
//!
//! - `; check: TEXT`: some line of the PTX contains `TEXT`, after the line matched by the
//!   previous `check` (checks match in order);
//! - `; check-not: TEXT`: no line between the lines matched by the surrounding `check`s
//!   contains `TEXT`;
//! - `; expect-error: TEXT`: emission fails with an error containing `TEXT` (and the file has
//!   no `check`).
//!
//! Files without `expect-error` are also assembled by `ptxas` (see `ptxas.rs`).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use weft_ir::passes::math::lower_math;
use weft_ir::{ValidKernel, text};
use weft_ptx::{Module, emit};

/// The directive names the harness knows.
const DIRECTIVES: &[&str] = &["check", "check-not", "expect-error"];

/// The directives at the head of a file: `(name, value)`.
fn directives(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let line = line.trim();
        let Some(comment) = line.strip_prefix(';') else {
            if line.is_empty() {
                continue;
            }
            break;
        };
        if let Some((name, value)) = comment.trim().split_once(':')
            && DIRECTIVES.contains(&name.trim())
        {
            out.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    out
}

/// Every filetest, sorted.
pub fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    files
}

/// The file's kernel, validated and math-lowered, emitted.
pub fn emit_file(path: &Path) -> Result<Result<Module, String>, String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let kernel = text::parse(&src).map_err(|e| format!("parse: {e}"))?;
    let lowered = lower_math(&kernel);
    let valid = ValidKernel::new(lowered).map_err(|e| format!("validate: {}", e.message))?;
    Ok(emit(&valid).map_err(|e| e.to_string()))
}

fn run_file(path: &Path) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let dirs = directives(&src);
    let expected_error = dirs.iter().find(|(n, _)| n == "expect-error");
    match (emit_file(path)?, expected_error) {
        (Err(e), Some((_, want))) => {
            if dirs.iter().any(|(n, _)| n != "expect-error") {
                return Err("`expect-error` files take no other directive".into());
            }
            if e.contains(want.as_str()) {
                Ok(())
            } else {
                Err(format!("expected an error containing {want:?}, got: {e}"))
            }
        }
        (Ok(_), Some((_, want))) => Err(format!("expected an error containing {want:?}")),
        (Err(e), None) => Err(format!("emission failed: {e}")),
        (Ok(m), None) => {
            if !dirs.iter().any(|(n, _)| n == "check") {
                return Err("a file that emits needs at least one `check`".into());
            }
            check(&m.text, &dirs)
        }
    }
}

/// Runs the `check` and `check-not` directives over `out`.
fn check(out: &str, dirs: &[(String, String)]) -> Result<(), String> {
    let lines: Vec<&str> = out.lines().collect();
    let mut at = 0;
    let mut pending_not: Vec<&str> = Vec::new();
    let verify_not = |from: usize, to: usize, nots: &[&str]| -> Result<(), String> {
        for n in nots {
            if let Some(l) = lines[from..to].iter().find(|l| l.contains(n)) {
                return Err(format!("check-not {n:?} matched {l:?}\n{out}"));
            }
        }
        Ok(())
    };
    for (name, value) in dirs {
        match name.as_str() {
            "check" => {
                let Some(found) = lines[at..].iter().position(|l| l.contains(value.as_str()))
                else {
                    return Err(format!("check {value:?} not found after line {at}\n{out}"));
                };
                verify_not(at, at + found, &pending_not)?;
                pending_not.clear();
                at += found + 1;
            }
            "check-not" => pending_not.push(value),
            _ => {}
        }
    }
    verify_not(at, lines.len(), &pending_not)
}

#[test]
fn every_filetest_holds() {
    let files = files();
    assert!(files.len() >= 5, "filetests missing: {files:?}");
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| run_file(f).err().map(|e| format!("{}: {e}", f.display())))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn emission_is_deterministic() {
    for f in files() {
        let (a, b) = (emit_file(&f).unwrap(), emit_file(&f).unwrap());
        assert_eq!(a.map(|m| m.text), b.map(|m| m.text), "{}", f.display());
    }
}
