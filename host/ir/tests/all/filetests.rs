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
//! A file with `; expect: ok` may also run passes on the kernel and check the result, in the
//! spirit of Cranelift's filetests:
//!
//! - `; run: PASS[, PASS...]` applies the passes named (see `weft_ir::passes::by_name`, and
//!   `lower-math` for `weft_ir::passes::math::lower_math`) in
//!   order; several `run` lines append to the list. The result must validate and survive the
//!   text round trip;
//! - `; check: TEXT`: some line of the printed result (renumbered in definition order, as the
//!   parser numbers values) contains `TEXT`, after the line matched by the previous `check`
//!   (so checks match in order);
//! - `; check-not: TEXT`: no line between the lines matched by the surrounding `check`s (the
//!   start or the end of the result where there is none) contains `TEXT`;
//! - `; check-report: TEXT`: some line of the passes' reports contains `TEXT`;
//! - `; class: C0 C1 ...`, `; alias: A0 A1 ...`: the facts' iteration class and alias set of
//!   each parameter, one token per parameter (`-` for none); `; alias: distinct` gives every
//!   store its own alias set; without `alias` every store's alias set is unknown;
//! - `; local: P ...`: the indices of the local parameters;
//! - `; one-point: yes | no`: whether the kernel runs on one point only (`FusionFacts`'
//!   `one_point`; `no` without the directive);
//! - `; interp: off | exact | tol=X`: the differential check. By default the harness runs the
//!   input and the result in the reference interpreter (`weft_ir::interp`) on the same
//!   pseudo-random data (derived from the facts: one class, equal extents; one alias set,
//!   shifted windows of one storage) and requires every non-local storage to agree within a
//!   relative 1e-9 (integers and bools exactly); `exact` requires equal bits, `tol=X` sets the
//!   tolerance, `off` skips the check. The input must run without error.
//!
//! Other comment lines in the header are free text. To add a kind of check, add a directive
//! name to `DIRECTIVES` and handle it in `run_file`.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use weft_ir::flat::{from_flat, to_flat};
use weft_ir::passes::{FusionFacts, by_name};
use weft_ir::{Kernel, renumber, text, validate};

use crate::interp_support::{Tolerance, differential};

/// The directive names the harness knows.
const DIRECTIVES: &[&str] = &[
    "expect",
    "expect-error",
    "run",
    "check",
    "check-not",
    "check-report",
    "class",
    "alias",
    "local",
    "one-point",
    "interp",
];

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
                Ok(k2) if k2 == k => {}
                Ok(_) => return Err("the flat round trip changed the kernel".into()),
                Err(e) => return Err(format!("the flat round trip failed: {e}")),
            }
            run_passes(&k, &dirs)
        }
        ("expect", Err(e)) => Err(format!("expected success, got: {e}")),
        ("expect-error", Ok(_)) => Err(format!(
            "expected an error containing {value:?}, got success"
        )),
        ("expect-error", _) if dirs.iter().any(|(n, _, _)| n != "expect-error") => Err(
            "`expect-error` files take no other directive (passes run only on valid kernels)"
                .into(),
        ),
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

/// The facts the directives give for `k`.
fn facts(k: &Kernel, dirs: &[(String, String, usize)]) -> Result<FusionFacts, String> {
    let n = k.params.len();
    let mut f = FusionFacts::unknown(n);
    let per_param = |value: &str, line: usize| -> Result<Vec<Option<u32>>, String> {
        let toks: Vec<&str> = value.split_whitespace().collect();
        if toks.len() != n {
            return Err(format!(
                "line {line}: {} tokens for {n} parameters",
                toks.len()
            ));
        }
        toks.iter()
            .map(|t| match *t {
                "-" => Ok(None),
                t => t
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("line {line}: bad token `{t}`")),
            })
            .collect()
    };
    for (name, value, line) in dirs {
        match name.as_str() {
            "class" => f.class = per_param(value, *line)?,
            "alias" if value == "distinct" => f.alias = FusionFacts::distinct(k).alias,
            "alias" => f.alias = per_param(value, *line)?,
            "local" => {
                for t in value.split_whitespace() {
                    let p: usize = t
                        .parse()
                        .map_err(|_| format!("line {line}: bad parameter `{t}`"))?;
                    *f.local
                        .get_mut(p)
                        .ok_or_else(|| format!("line {line}: no parameter {p}"))? = true;
                }
            }
            "one-point" => {
                f.one_point = match value.as_str() {
                    "yes" => true,
                    "no" => false,
                    v => return Err(format!("line {line}: `one-point` is yes or no, not `{v}`")),
                }
            }
            _ => {}
        }
    }
    Ok(f)
}

/// Passes outside the fusion pipeline's registry: `lower-math`
/// ([`weft_ir::passes::math::lower_math`]).
fn extra_pass(name: &str) -> Option<weft_ir::passes::PassFn> {
    match name {
        "lower-math" => {
            Some(|k, f| weft_ir::passes::PassOutput::new(weft_ir::passes::math::lower_math(k), f))
        }
        _ => None,
    }
}

/// Runs the `run` passes on `k` and checks the result against the other directives.
fn run_passes(k: &Kernel, dirs: &[(String, String, usize)]) -> Result<(), String> {
    let passes: Vec<String> = dirs
        .iter()
        .filter(|(n, _, _)| n == "run")
        .flat_map(|(_, v, _)| v.split(',').map(|p| p.trim().to_string()))
        .filter(|p| !p.is_empty())
        .collect();
    let has_checks = dirs.iter().any(|(n, _, _)| {
        matches!(
            n.as_str(),
            "check"
                | "check-not"
                | "check-report"
                | "class"
                | "alias"
                | "local"
                | "one-point"
                | "interp"
        )
    });
    if passes.is_empty() {
        return if has_checks {
            Err("pass directives without a `; run:` line".into())
        } else {
            Ok(())
        };
    }
    let facts0 = facts(k, dirs)?;
    let mut kernel = k.clone();
    let mut facts = facts0.clone();
    let mut report: Vec<String> = Vec::new();
    // For each input parameter, its index in the current kernel.
    let mut map: Vec<Option<u32>> = (0..k.params.len() as u32).map(Some).collect();
    for name in &passes {
        let pass = by_name(name)
            .or_else(|| extra_pass(name))
            .ok_or_else(|| format!("unknown pass `{name}`"))?;
        let out = pass(&kernel, &facts);
        validate(&out.kernel).map_err(|e| {
            format!(
                "pass `{name}` made an invalid kernel: {}\n{}",
                e.message,
                text::print(&out.kernel)
            )
        })?;
        // Follow the parameters through passes that renumber them.
        for m in &mut map {
            *m = m.and_then(|p| out.param_map.get(p as usize).copied().flatten());
        }
        report.extend(out.report.lines());
        kernel = out.kernel;
        facts = out.facts;
    }
    // Checks see the result numbered in definition order, as the parser would number it.
    let kernel = renumber(&kernel);
    let printed = text::print(&kernel);
    match text::parse(&printed) {
        Ok(k2) if k2 == kernel => {}
        Ok(_) => return Err(format!("print/parse changed the result:\n{printed}")),
        Err(e) => return Err(format!("the printed result does not parse: {e}\n{printed}")),
    }
    let lines: Vec<&str> = printed.lines().collect();
    let mut at = 0;
    // `check-not`s waiting for the next `check` to close their region.
    let mut nots: Vec<(&str, usize)> = Vec::new();
    let check_nots = |nots: &mut Vec<(&str, usize)>, region: &[&str]| -> Result<(), String> {
        for (text, line) in nots.drain(..) {
            if let Some(l) = region.iter().find(|l| l.contains(text)) {
                return Err(format!(
                    "line {line}: `check-not: {text}` found in `{l}`:\n{printed}"
                ));
            }
        }
        Ok(())
    };
    for (name, value, line) in dirs {
        match name.as_str() {
            "check" => match lines[at..].iter().position(|l| l.contains(value.as_str())) {
                Some(i) => {
                    check_nots(&mut nots, &lines[at..at + i])?;
                    at += i + 1;
                }
                None => {
                    return Err(format!(
                        "line {line}: `check: {value}` not found (after output line {at}) in:\n\
                         {printed}\nreport:\n{}",
                        report.join("\n")
                    ));
                }
            },
            "check-not" => nots.push((value.as_str(), *line)),
            "check-report" if !report.iter().any(|l| l.contains(value.as_str())) => {
                return Err(format!(
                    "line {line}: `check-report: {value}` not in the report:\n{}",
                    report.join("\n")
                ));
            }
            _ => {}
        }
    }
    check_nots(&mut nots, &lines[at..])?;
    let interp = dirs
        .iter()
        .rev()
        .find(|(n, _, _)| n == "interp")
        .map(|(_, v, _)| v.as_str())
        .unwrap_or("tol=1e-9");
    let tol = match interp {
        "off" => return Ok(()),
        "exact" => Tolerance::Exact,
        t => match t.strip_prefix("tol=").and_then(|x| x.parse().ok()) {
            Some(x) => Tolerance::Relative(x),
            None => return Err(format!("bad `interp: {t}`")),
        },
    };
    for seed in 0..4 {
        match differential(k, &kernel, &map, &facts0, seed, tol) {
            Ok(true) => {}
            Ok(false) => return Err("the input kernel fails in the interpreter".into()),
            Err(e) => {
                return Err(format!(
                    "differential check (seed {seed}): {e}\nresult:\n{printed}"
                ));
            }
        }
    }
    Ok(())
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

#[test]
fn harness_checks_pass_results() {
    let dir = std::env::temp_dir().join(format!("weft-ir-filetest-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("run.ir");
    let kernel = "kernel @k(%x: store<f64, 1, readwrite>) {
  %one = const f64 1.0
  parallel %x (%i) { store %x[%i], %one }
  parallel %x (%i) { %v = load %x[%i]  %w = add %v, %one  store %x[%i], %w }
}\n";
    let file = |head: &str| {
        std::fs::write(&f, format!("; expect: ok\n{head}{kernel}")).unwrap();
        run_file(&f)
    };
    // Checks match in order; check-not looks between the surrounding checks.
    let ok = "; run: fuse-loops\n; check: parallel\n; check-not: parallel\n; check: add\n";
    assert_eq!(file(ok), Ok(()));
    assert!(
        file("; run: fuse-loops\n; check: add\n; check: parallel\n")
            .unwrap_err()
            .contains("`check: parallel` not found")
    );
    assert!(
        file("; run: none-such\n")
            .unwrap_err()
            .contains("unknown pass")
    );
    assert!(
        file("; check: add\n")
            .unwrap_err()
            .contains("without a `; run:` line")
    );
    assert!(
        file("; run: fuse-loops\n; check-not: parallel\n")
            .unwrap_err()
            .contains("`check-not: parallel` found")
    );
    assert_eq!(
        file("; run: fuse-loops, forward, dce\n; check-report: 1 load(s) replaced\n"),
        Ok(())
    );
    assert!(
        file("; run: fuse-loops\n; check-report: not fused\n")
            .unwrap_err()
            .contains("not in the report")
    );
    // Facts must name every parameter.
    assert!(
        file("; run: dce\n; class: 0 0\n")
            .unwrap_err()
            .contains("2 tokens for 1 parameters")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
