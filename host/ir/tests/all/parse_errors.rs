//! Parse errors carry the line where the problem is and say what it is.

#![allow(clippy::unwrap_used)]

use weft_ir::text::{ParseError, parse};

/// (source, line, expected substring).
const ROWS: &[(&str, usize, &str)] = &[
    ("", 1, "expected `kernel`, found the end of the input"),
    ("; only a comment\n", 2, "expected `kernel`"),
    (
        "kernel k() {}",
        1,
        "expected a kernel name (`@name`), found `k`",
    ),
    ("kernel @() {}", 1, "expected a name after `@`"),
    ("kernel @\"open() {}", 1, "unterminated quoted kernel name"),
    ("kernel @\"a\\q\"() {}", 1, "unknown escape"),
    ("kernel @k(%a: f16) {}", 1, "unknown type `f16`"),
    (
        "kernel @k(%a: store<f64, 1, readonly>) {}",
        1,
        "unknown privilege `readonly`",
    ),
    (
        "kernel @k(%a: store<f64, 1, reduce(avg)>) {}",
        1,
        "unknown reduction operator `avg`",
    ),
    (
        "kernel @k(%a: store<f64, -1, read>) {}",
        1,
        "expected a rank, found `-1`",
    ),
    (
        "kernel @k(%a: f64, %a: f64) {}",
        1,
        "parameter `%a` is declared twice",
    ),
    (
        "kernel @k(\n%a: f64\n%b: f64) {}",
        3,
        "expected `,`, found `%b`",
    ),
    (
        "kernel @k() {\n  %x = frobnicate %y\n}",
        2,
        "unknown operation `frobnicate`",
    ),
    (
        "kernel @k() {\n  %x = const f64 1.0\n  %y = add %x, %z\n}",
        3,
        "`%z` is never defined",
    ),
    (
        "kernel @k() {\n  %x = const f64 1.0\n\n  %x = const f64 2.0\n}",
        4,
        "`%x` is already defined (on line 2)",
    ),
    (
        "kernel @k(%p: f64) {\n  %p = const f64 1.0\n}",
        2,
        "`%p` is the name of a parameter",
    ),
    (
        "kernel @k(%p: f64) {\n  %x = const f64 1.0\n  %y = add %x, %p\n}",
        3,
        "`%p` is a parameter, not a value",
    ),
    (
        "kernel @k() {\n  %x = param %q\n}",
        2,
        "unknown parameter `%q`",
    ),
    (
        "kernel @k() {\n  %x = const i32 1.5\n}",
        2,
        "bad i32 constant `1.5`",
    ),
    (
        "kernel @k() {\n  %x = const i32 2147483648\n}",
        2,
        "bad i32 constant",
    ),
    (
        "kernel @k() {\n  %x = const f64 one\n}",
        2,
        "bad f64 constant `one`",
    ),
    (
        "kernel @k() {\n  %x = const f32 0x123456789\n}",
        2,
        "bad f32 constant",
    ),
    (
        "kernel @k() {\n  %x = const bool 1\n}",
        2,
        "bad bool constant `1`",
    ),
    (
        "kernel @k() {\n  %x = const f64 1.0\n",
        3,
        "expected `}`, found the end of the input",
    ),
    (
        "kernel @k() {\n}\nkernel @j() {}",
        3,
        "expected the end of the input after the kernel",
    ),
    (
        "kernel @k() {\n  yield\n}",
        2,
        "`yield` outside a `for` loop body",
    ),
    (
        "kernel @k(%o: store<f64, 1, write>) {\n  parallel %o (%i) {\n    yield %i\n  }\n}",
        3,
        "`yield` outside a `for` loop body",
    ),
    (
        "kernel @k() {\n  %x = const f64 1.0 # two\n}",
        2,
        "unexpected character '#'",
    ),
    (
        "kernel @k() {\n  % = const f64 1.0\n}",
        2,
        "expected a name after `%`",
    ),
    (
        "kernel @k() {\n  %a = const i64 0\n  for %i = %a %a { }\n}",
        3,
        "expected `to`, found `%a`",
    ),
    (
        "kernel @k() {\n  %a = const i64 0\n  for %i = %a to %a iter(%c %a) { }\n}",
        3,
        "expected `=`, found `%a`",
    ),
    (
        "kernel @k() {\n  %a = const i64 0\n  for %i = %a to %a iter(%i = %a) { }\n}",
        3,
        "`%i` is already defined (on line 3)",
    ),
    (
        "kernel @k(%o: store<f64, 1, write>) {\n  parallel %o (%i, %i) { }\n}",
        2,
        "`%i` is already defined",
    ),
    (
        "kernel @k(%o: store<f64, 1, write>) {\n  %e = extent %o, x\n}",
        2,
        "expected a dimension, found `x`",
    ),
    (
        "kernel @k(%o: store<f64, 1, write>) {\n  %e = load %o(%i)\n}",
        2,
        "expected `[`, found `(`",
    ),
    (
        "kernel @k() {\n  %a, = const f64 1.0\n}",
        2,
        "expected a value (`%name`), found `=`",
    ),
];

#[test]
fn parse_errors_have_lines_and_messages() {
    let mut failures = Vec::new();
    for (src, line, expected) in ROWS {
        match parse(src) {
            Ok(k) => failures.push(format!("{src:?}: parsed as {k:?}")),
            Err(ParseError { line: l, message }) => {
                if l != *line || !message.contains(expected) {
                    failures.push(format!(
                        "{src:?}: got line {l}: {message:?}; expected line {line}: {expected:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn display_shows_the_line() {
    let e = parse("kernel @k() {\n  %x = nope\n}").unwrap_err();
    assert_eq!(e.to_string(), "line 2: unknown operation `nope`");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    let mut src = String::from("kernel @deep() {\n%z = const i64 0\n");
    for d in 0..depth {
        src.push_str(&format!("for %i{d} = %z to %z {{\n"));
    }
    for _ in 0..depth {
        src.push_str("}\n");
    }
    src.push_str("}\n");
    let e = parse(&src).unwrap_err();
    assert_eq!(e.line, 67);
    assert!(e.message.contains("loops nest more than 64 deep"), "{e}");
    // 64 levels are fine.
    let mut src = String::from("kernel @deep() {\n%z = const i64 0\n");
    for d in 0..64 {
        src.push_str(&format!("for %i{d} = %z to %z {{\n"));
    }
    for _ in 0..64 {
        src.push_str("}\n");
    }
    src.push_str("}\n");
    let k = parse(&src).unwrap();
    weft_ir::validate(&k).unwrap();
}

#[test]
fn garbage_never_panics() {
    // Every prefix of a valid kernel, and a few mutations, fail cleanly or parse.
    let src = "kernel @k(%a: store<f64, 1, read>, %o: store<f64, 0, reduce(sum)>, %s: f32) {
  %p = param %s ; comment
  parallel %a (%i) {
    %x = load %a[%i]
    %z = const i64 0
    %r = for %j = %z to %i iter(%c = %x) { %d = add %c, %x
      yield %d }
    reduce sum %o[], %r
  }
}";
    for end in 0..=src.len() {
        if src.is_char_boundary(end) {
            let _ = parse(&src[..end]);
        }
    }
    for (i, _) in src.char_indices() {
        let mut s = src.to_string();
        s.remove(i);
        let _ = parse(&s);
        let mut s = src.to_string();
        s.insert(i, '%');
        let _ = parse(&s);
    }
    assert!(parse(src).is_ok());
}
