//! The text filetest harness: runs every `tests/filetests/*.ir` file.
//!
//! A file is one kernel in the text form, headed by comment lines that hold directives, one
//! per line, `; NAME: VALUE`. Exactly one of these must be present:
//!
//! - `; expect: ok`: the kernel parses and validates, and it survives the round trips through
//!   the text form and the flat form unchanged;
//! - `; expect-error: SUBSTRING`: parsing or validation fails with an error whose text (for a
//!   parse error `line N: message`, for a validation error the message) contains `SUBSTRING`.
//!
//! Other comment lines in the header are free text. To add a kind of check (a pass to run and
//! its expected output, say), add a directive name to `DIRECTIVES` and handle it in
//! `run_file`.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use weft_ir::flat::{from_flat, to_flat};
use weft_ir::{renumber, text, validate};

/// The directive names the harness knows.
const DIRECTIVES: &[&str] = &["expect", "expect-error"];

/// The directives at the head of a file: `(name, value, line)`.
fn directives(src: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (i, line) in src.lines().enumerate() {
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
            out.push((name.trim().to_string(), value.trim().to_string(), i + 1));
        }
    }
    out
}

fn run_file(path: &Path) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let dirs = directives(&src);
    let expects: Vec<_> = dirs
        .iter()
        .filter(|(n, _, _)| n == "expect" || n == "expect-error")
        .collect();
    let [(name, value, _)] = expects.as_slice() else {
        return Err(format!(
            "needs exactly one `; expect: ok` or `; expect-error: ...` directive, found {}",
            expects.len()
        ));
    };
    let outcome = text::parse(&src)
        .map_err(|e| e.to_string())
        .and_then(|k| validate(&k).map(|_| k).map_err(|e| e.message));
    match (name.as_str(), outcome) {
        ("expect", Ok(k)) => {
            if value != "ok" {
                return Err(format!("unknown expectation `{value}` (use `ok`)"));
            }
            let r = renumber(&k);
            if r != k {
                return Err("the parser did not number values in definition order".into());
            }
            let printed = text::print(&k);
            match text::parse(&printed) {
                Ok(k2) if k2 == k => {}
                Ok(_) => return Err(format!("print/parse changed the kernel:\n{printed}")),
                Err(e) => return Err(format!("the printed kernel does not parse: {e}\n{printed}")),
            }
            match from_flat(&to_flat(&k)) {
                Ok(k2) if k2 == k => Ok(()),
                Ok(_) => Err("the flat round trip changed the kernel".into()),
                Err(e) => Err(format!("the flat round trip failed: {e}")),
            }
        }
        ("expect", Err(e)) => Err(format!("expected success, got: {e}")),
        ("expect-error", Ok(_)) => Err(format!(
            "expected an error containing {value:?}, got success"
        )),
        ("expect-error", Err(e)) => {
            if e.contains(value.as_str()) {
                Ok(())
            } else {
                Err(format!("expected an error containing {value:?}, got: {e}"))
            }
        }
        _ => unreachable!(),
    }
}

fn filetests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    files.sort();
    files
}

#[test]
fn filetests_pass() {
    let files = filetests();
    assert!(files.len() >= 10, "filetests missing: {files:?}");
    let mut failures = Vec::new();
    for f in &files {
        if let Err(e) = run_file(f) {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} filetests failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn harness_rejects_files_without_an_expectation() {
    let dir = std::env::temp_dir().join(format!("weft-ir-filetest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("none.ir");
    std::fs::write(&f, "; expct: ok\nkernel @k() {}\n").unwrap();
    assert!(run_file(&f).unwrap_err().contains("exactly one"));
    std::fs::write(&f, "; expect: ok\n; expect-error: x\nkernel @k() {}\n").unwrap();
    assert!(run_file(&f).unwrap_err().contains("exactly one"));
    std::fs::write(&f, "; expect: ok\nkernel @k() {}\n").unwrap();
    assert_eq!(run_file(&f), Ok(()));
    std::fs::write(&f, "; expect-error: nope\nkernel @k() {}\n").unwrap();
    assert!(run_file(&f).unwrap_err().contains("got success"));
    std::fs::remove_dir_all(&dir).unwrap();
}
