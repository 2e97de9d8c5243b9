//! The text form of the kernel IR, printed by [`print()`] and parsed by [`parse()`].
//!
//! The form is MLIR-like, one instruction per line by convention (the grammar does not need
//! the line breaks). An example:
//!
//! ```text
//! ; y = a * x + y over a 1-D store
//! kernel @numeric.axpy.f64(%arg0: f64, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, readwrite>) {
//!   %0 = param %arg0
//!   parallel %arg2 (%1) {
//!     %2 = load %arg1[%1]
//!     %3 = load %arg2[%1]
//!     %4 = mul %0, %2
//!     %5 = add %4, %3
//!     store %arg2[%1], %5
//!   }
//! }
//! ```
//!
//! # Syntax
//!
//! - **Comments** run from `;` to the end of the line.
//! - **Kernel.** `kernel @NAME(PARAMS) { BODY }`. A name made only of letters, digits, `_`, `.`
//!   and `-` is written bare; any other name is quoted, `@"a name"`, with the escapes `\\`,
//!   `\"`, `\n`, `\r`, `\t` and `\u{HEX}`.
//! - **Parameters** are `%NAME: TYPE`, where `TYPE` is a scalar type (`f32`, `f64`, `i32`,
//!   `i64`, `bool`) or `store<DTYPE, RANK, PRIVILEGE>` with `PRIVILEGE` one of `read`,
//!   `write`, `readwrite` and `reduce(OP)` (`OP`: `sum`, `prod`, `min`, `max`). Parameters are
//!   not values: they appear only where an operation names a parameter (`param`, `load`,
//!   `store`, `reduce`, `extent`, `origin`, `parallel`). The printer names them `%arg0`,
//!   `%arg1`, ...
//! - **Values** are `%NAME` with `NAME` made of letters, digits, `_` and `.`. The printer names
//!   value `ValueId(n)` `%n`; the parser accepts any names and numbers values in definition
//!   order (see [`crate::renumber`]). A name may be defined again once the loop body that
//!   defined it has ended, but not while it is visible, and it may not be a parameter's name.
//! - **Instructions** are `RESULTS = OPERATION` or, with no results, `OPERATION`, where
//!   `RESULTS` is `%a` or `%a, %b, ...`:
//!
//! | operation | meaning |
//! | --- | --- |
//! | `const f64 1.5`, `const i32 -3`, `const bool true` | a constant |
//! | `param %s` | the value of scalar parameter `%s` |
//! | `add %a, %b` (also `sub mul div rem min max pow atan2 and or xor shl shr`) | a binary operation |
//! | `neg %a` (also `abs sqrt exp log sin cos tanh erf asin acos atan sinh cosh asinh acosh atanh floor ceil not`) | a unary operation |
//! | `lt %a, %b` (also `eq ne le gt ge`) | a comparison |
//! | `select %c, %a, %b` | `%c ? %a : %b` |
//! | `cast f32 %a` | a conversion |
//! | `bitcast i64 %a` | the same bits read as another type of the same size |
//! | `load %p[%i, %j]` | a load (`%p[]` for rank 0) |
//! | `store %p[%i], %v` | a store |
//! | `reduce sum %p[%i], %v` | a reduction |
//! | `extent %p, 0`, `origin %p, 0` | a sub-store's extent or origin along a dimension |
//! | `parallel %p (%i, %j) { ... }` | a parallel loop; `%i`, `%j` are its indices |
//! | `for %k = %lo to %hi iter(%c = %init, ...) { ... yield %next, ... }` | a `for` loop |
//!
//!   A `for` loop's results are its carried values' final values: `%r = for %k = %lo to %hi
//!   iter(%acc = %zero) { ... yield %acc2 }`. With no carried values, the `iter(...)` clause and
//!   the `yield` are left out.
//! - **Float constants** are printed in the shortest decimal form that reads back to the same
//!   bits (`1.5`, `-0.0`, `1e-300`), as `inf`, `-inf` or `nan` (the canonical quiet NaN), or
//!   as their bit pattern in hexadecimal (`0x7ff8000000000001`), which the parser accepts for
//!   any float constant. Float constants round-trip bit-exactly.
//!
//! Printing never fails, even for an invalid kernel; what it prints for a kernel whose
//! parameters or loops do not fit together (a missing carried value, a parameter index out of
//! range) may not parse back.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use crate::validate::{MAX_LOOP_DEPTH, for_each_value_mut};
use crate::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, Privilege,
    ReduceOp, Scalar, UnaryOp, ValueId,
};

/// Why a text kernel does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// The line (1-based) where the problem was found.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

/// Prints a kernel in the text form.
///
/// ```
/// use weft_ir::{Inst, Kernel, Op, Scalar, ValueId};
/// let k = Kernel {
///     name: "k".into(),
///     params: vec![],
///     body: vec![Inst { results: vec![ValueId(0)], op: Op::Const(Scalar::F64(1.5)) }],
/// };
/// assert_eq!(weft_ir::text::print(&k), "kernel @k() {\n  %0 = const f64 1.5\n}\n");
/// assert_eq!(weft_ir::text::parse(&weft_ir::text::print(&k)), Ok(k));
/// ```
pub fn print(kernel: &Kernel) -> String {
    let mut out = String::new();
    out.push_str("kernel @");
    out.push_str(&kernel_name(&kernel.name));
    out.push('(');
    for (i, p) in kernel.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "%arg{i}: {}", param_type(*p));
    }
    out.push_str(") {\n");
    print_block(&mut out, &kernel.body, 1);
    out.push_str("}\n");
    out
}

impl fmt::Display for Kernel {
    /// The text form, as [`print()`] writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

impl std::str::FromStr for Kernel {
    type Err = ParseError;

    /// Parses the text form, as [`parse`] does.
    fn from_str(s: &str) -> Result<Kernel, ParseError> {
        parse(s)
    }
}

/// The text form of a privilege (`read`, `write`, `readwrite`, `reduce(sum)`...).
pub fn privilege_name(p: Privilege) -> String {
    match p {
        Privilege::Read => "read".into(),
        Privilege::Write => "write".into(),
        Privilege::ReadWrite => "readwrite".into(),
        Privilege::Reduce(op) => format!("reduce({})", op.name()),
    }
}

/// The text form of a parameter's type (`f64`, `store<f32, 2, read>`...).
pub fn param_type(p: Param) -> String {
    match p {
        Param::Scalar { dtype } => dtype.name().into(),
        Param::Store {
            dtype,
            rank,
            privilege,
        } => format!("store<{dtype}, {rank}, {}>", privilege_name(privilege)),
    }
}

/// The text form of a constant's value, without its type (`1.5`, `-3`, `true`, `nan`...).
///
/// Floats read back bit-exactly: see the [module documentation](self).
pub fn scalar_literal(s: Scalar) -> String {
    match s {
        Scalar::F32(v) if v.is_nan() => {
            if v.to_bits() == f32::NAN.to_bits() {
                "nan".into()
            } else {
                format!("0x{:08x}", v.to_bits())
            }
        }
        Scalar::F64(v) if v.is_nan() => {
            if v.to_bits() == f64::NAN.to_bits() {
                "nan".into()
            } else {
                format!("0x{:016x}", v.to_bits())
            }
        }
        Scalar::F32(v) if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
        Scalar::F64(v) if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
        // `Debug` prints the shortest form that reads back to the same bits, with `.0` or an
        // exponent, so the literal always looks like a float.
        Scalar::F32(v) => format!("{v:?}"),
        Scalar::F64(v) => format!("{v:?}"),
        Scalar::I32(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::Bool(v) => v.to_string(),
    }
}

fn is_bare_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn is_value_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.')
}

/// A kernel name as written after `@`.
fn kernel_name(name: &str) -> String {
    if !name.is_empty() && name.chars().all(is_bare_name_char) {
        return name.into();
    }
    let mut s = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(s, "\\u{{{:x}}}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

fn list(vs: &[ValueId]) -> String {
    let mut s = String::new();
    for (i, v) in vs.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{v}");
    }
    s
}

fn access(a: &Access) -> String {
    format!("%arg{}[{}]", a.param, list(&a.indices))
}

/// The text of an instruction without its loop body: the whole instruction for operations
/// other than loops, and the line that opens the body for loops. Used in error messages.
pub fn inst_head(inst: &Inst) -> String {
    let mut s = String::new();
    if !inst.results.is_empty() {
        s.push_str(&list(&inst.results));
        s.push_str(" = ");
    }
    match &inst.op {
        Op::Const(c) => {
            let _ = write!(s, "const {} {}", c.dtype(), scalar_literal(*c));
        }
        Op::Param(p) => {
            let _ = write!(s, "param %arg{p}");
        }
        Op::Binary(op, a, b) => {
            let _ = write!(s, "{} {a}, {b}", op.name());
        }
        Op::Unary(op, a) => {
            let _ = write!(s, "{} {a}", op.name());
        }
        Op::Cmp(op, a, b) => {
            let _ = write!(s, "{} {a}, {b}", op.name());
        }
        Op::Select(c, a, b) => {
            let _ = write!(s, "select {c}, {a}, {b}");
        }
        Op::Fma(a, b, c) => {
            let _ = write!(s, "fma {a}, {b}, {c}");
        }
        Op::Cast(t, a) => {
            let _ = write!(s, "cast {t} {a}");
        }
        Op::Bitcast(t, a) => {
            let _ = write!(s, "bitcast {t} {a}");
        }
        Op::Load(a) => {
            let _ = write!(s, "load {}", access(a));
        }
        Op::Store(a, v) => {
            let _ = write!(s, "store {}, {v}", access(a));
        }
        Op::Reduce(a, op, v) => {
            let _ = write!(s, "reduce {} {}, {v}", op.name(), access(a));
        }
        Op::Extent { param, dim } => {
            let _ = write!(s, "extent %arg{param}, {dim}");
        }
        Op::Origin { param, dim } => {
            let _ = write!(s, "origin %arg{param}, {dim}");
        }
        Op::Parallel(ParallelLoop { over, indices, .. }) => {
            let _ = write!(s, "parallel %arg{over} ({}) {{", list(indices));
        }
        Op::For(ForLoop {
            lo,
            hi,
            induction,
            init,
            carried,
            ..
        }) => {
            let _ = write!(s, "for {induction} = {lo} to {hi}");
            if !init.is_empty() || !carried.is_empty() {
                s.push_str(" iter(");
                for i in 0..init.len().max(carried.len()) {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    let side =
                        |v: Option<&ValueId>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
                    let _ = write!(s, "{} = {}", side(carried.get(i)), side(init.get(i)));
                }
                s.push(')');
            }
            s.push_str(" {");
        }
    }
    s
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn print_block(out: &mut String, body: &[Inst], depth: usize) {
    for inst in body {
        indent(out, depth);
        out.push_str(&inst_head(inst));
        out.push('\n');
        match &inst.op {
            Op::Parallel(p) => {
                print_block(out, &p.body, depth + 1);
                indent(out, depth);
                out.push_str("}\n");
            }
            Op::For(l) => {
                print_block(out, &l.body, depth + 1);
                if !l.yields.is_empty() {
                    indent(out, depth + 1);
                    let _ = writeln!(out, "yield {}", list(&l.yields));
                }
                indent(out, depth);
                out.push_str("}\n");
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lexing
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// `%name`.
    Value(String),
    /// `@name` or `@"name"`.
    Global(String),
    /// A keyword, type name or number.
    Word(String),
    /// One of `( ) { } [ ] < > , : =`.
    Punct(char),
    /// The end of the input.
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Value(s) => write!(f, "`%{s}`"),
            Tok::Global(s) => write!(f, "`@{}`", kernel_name(s)),
            Tok::Word(s) => write!(f, "`{s}`"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::Eof => f.write_str("the end of the input"),
        }
    }
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        message: message.into(),
    })
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let mut toks = Vec::new();
    let mut chars = src.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            ';' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '(' | ')' | '{' | '}' | '[' | ']' | '<' | '>' | ',' | ':' | '=' => {
                toks.push((Tok::Punct(c), line));
            }
            '%' => {
                let mut name = String::new();
                while let Some(&c) = chars.peek().filter(|&&c| is_value_name_char(c)) {
                    name.push(c);
                    chars.next();
                }
                if name.is_empty() {
                    return err(line, "expected a name after `%`");
                }
                toks.push((Tok::Value(name), line));
            }
            '@' => {
                let start = line;
                let mut name = String::new();
                if chars.peek() == Some(&'"') {
                    chars.next();
                    loop {
                        match chars.next() {
                            None => return err(start, "unterminated quoted kernel name"),
                            Some('"') => break,
                            Some('\n') => return err(line, "line break in a quoted kernel name"),
                            Some('\\') => match chars.next() {
                                Some('\\') => name.push('\\'),
                                Some('"') => name.push('"'),
                                Some('n') => name.push('\n'),
                                Some('r') => name.push('\r'),
                                Some('t') => name.push('\t'),
                                Some('u') => {
                                    if chars.next() != Some('{') {
                                        return err(line, "expected `{` after `\\u`");
                                    }
                                    let mut hex = String::new();
                                    loop {
                                        match chars.next() {
                                            Some('}') => break,
                                            Some(c) if c.is_ascii_hexdigit() && hex.len() < 6 => {
                                                hex.push(c);
                                            }
                                            _ => return err(line, "bad `\\u{...}` escape"),
                                        }
                                    }
                                    match u32::from_str_radix(&hex, 16)
                                        .ok()
                                        .and_then(char::from_u32)
                                    {
                                        Some(c) => name.push(c),
                                        None => return err(line, "bad `\\u{...}` escape"),
                                    }
                                }
                                _ => return err(line, "unknown escape in a quoted kernel name"),
                            },
                            Some(c) => name.push(c),
                        }
                    }
                } else {
                    while let Some(&c) = chars.peek().filter(|&&c| is_bare_name_char(c)) {
                        name.push(c);
                        chars.next();
                    }
                    if name.is_empty() {
                        return err(line, "expected a name after `@`");
                    }
                }
                toks.push((Tok::Global(name), start));
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.') => {
                let mut word = String::from(c);
                while let Some(&c) = chars
                    .peek()
                    .filter(|&&c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
                {
                    word.push(c);
                    chars.next();
                }
                toks.push((Tok::Word(word), line));
            }
            c => return err(line, format!("unexpected character {c:?}")),
        }
    }
    toks.push((Tok::Eof, line));
    Ok(toks)
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Parses a kernel in the text form. See the [module documentation](self) for the syntax.
///
/// Values are numbered in definition order. A use of a name that is not visible resolves to
/// the latest earlier definition of that name, or else to its first later one, so that the
/// validator, not the parser, reports scope errors (the parser reports names defined nowhere).
pub fn parse(src: &str) -> Result<Kernel, ParseError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        params: HashMap::new(),
        visible: HashMap::new(),
        latest: HashMap::new(),
        first: HashMap::new(),
        forward: Vec::new(),
        next: 0,
    };
    p.kernel()
}

/// The number standing for the `k`-th forward reference until it is resolved.
fn placeholder(k: usize) -> ValueId {
    ValueId(u32::MAX - k as u32)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// Parameter names and indices.
    params: HashMap<String, u32>,
    /// Visible value names: their value and the line that defined them.
    visible: HashMap<String, (ValueId, usize)>,
    /// The latest definition of each name so far.
    latest: HashMap<String, ValueId>,
    /// The first definition of each name.
    first: HashMap<String, ValueId>,
    /// Uses of names not defined yet: name and line.
    forward: Vec<(String, usize)>,
    /// The next value number.
    next: u32,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).map_or(&Tok::Eof, |t| &t.0)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.1)
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn fail<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        err(self.line(), message)
    }

    fn unexpected<T>(&self, wanted: &str) -> Result<T, ParseError> {
        self.fail(format!("expected {wanted}, found {}", self.peek()))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.unexpected(&format!("`{c}`"))
        }
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Word(s) if s == w)
    }

    fn keyword(&mut self, w: &str) -> Result<(), ParseError> {
        if self.is_word(w) {
            self.pos += 1;
            Ok(())
        } else {
            self.unexpected(&format!("`{w}`"))
        }
    }

    fn word(&mut self, wanted: &str) -> Result<String, ParseError> {
        match self.peek() {
            Tok::Word(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => self.unexpected(wanted),
        }
    }

    fn value_name(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            Tok::Value(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => self.unexpected("a value (`%name`)"),
        }
    }

    fn u32_lit(&mut self, what: &str) -> Result<u32, ParseError> {
        let w = self.word(what)?;
        match w.parse::<u32>() {
            Ok(n) if w.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => err(
                self.toks[self.pos - 1].1,
                format!("expected {what}, found `{w}`"),
            ),
        }
    }

    fn dtype(&mut self) -> Result<DType, ParseError> {
        let line = self.line();
        let w = self.word("a type")?;
        DType::from_name(&w).map_or_else(
            || {
                err(
                    line,
                    format!("unknown type `{w}` (expected f32, f64, i32, i64 or bool)"),
                )
            },
            Ok,
        )
    }

    fn reduce_op(&mut self) -> Result<ReduceOp, ParseError> {
        let line = self.line();
        let w = self.word("a reduction operator")?;
        ReduceOp::from_name(&w).map_or_else(
            || {
                err(
                    line,
                    format!("unknown reduction operator `{w}` (expected sum, prod, min or max)"),
                )
            },
            Ok,
        )
    }

    fn privilege(&mut self) -> Result<Privilege, ParseError> {
        let line = self.line();
        let w = self.word("a privilege")?;
        Ok(match w.as_str() {
            "read" => Privilege::Read,
            "write" => Privilege::Write,
            "readwrite" => Privilege::ReadWrite,
            "reduce" => {
                self.punct('(')?;
                let op = self.reduce_op()?;
                self.punct(')')?;
                Privilege::Reduce(op)
            }
            _ => {
                return err(
                    line,
                    format!(
                        "unknown privilege `{w}` (expected read, write, readwrite or reduce(op))"
                    ),
                );
            }
        })
    }

    fn param_type(&mut self) -> Result<Param, ParseError> {
        if self.is_word("store") {
            self.pos += 1;
            self.punct('<')?;
            let dtype = self.dtype()?;
            self.punct(',')?;
            let rank = self.u32_lit("a rank")?;
            self.punct(',')?;
            let privilege = self.privilege()?;
            self.punct('>')?;
            Ok(Param::Store {
                dtype,
                rank,
                privilege,
            })
        } else {
            Ok(Param::Scalar {
                dtype: self.dtype()?,
            })
        }
    }

    /// A reference to a parameter.
    fn param_ref(&mut self) -> Result<u32, ParseError> {
        let line = self.line();
        let name = match self.peek() {
            Tok::Value(s) => s.clone(),
            _ => return self.unexpected("a parameter (`%name`)"),
        };
        self.pos += 1;
        match self.params.get(&name) {
            Some(&i) => Ok(i),
            None => err(line, format!("unknown parameter `%{name}`")),
        }
    }

    /// A use of a value.
    fn use_value(&mut self) -> Result<ValueId, ParseError> {
        let line = self.line();
        let name = self.value_name()?;
        if let Some(&(v, _)) = self.visible.get(&name) {
            return Ok(v);
        }
        if let Some(&v) = self.latest.get(&name) {
            return Ok(v);
        }
        if self.params.contains_key(&name) {
            return err(line, format!("`%{name}` is a parameter, not a value"));
        }
        if self.forward.len() >= 1 << 20 {
            return err(line, "too many forward references");
        }
        self.forward.push((name, line));
        Ok(placeholder(self.forward.len() - 1))
    }

    fn use_list(&mut self, close: char) -> Result<Vec<ValueId>, ParseError> {
        let mut vs = Vec::new();
        if self.eat_punct(close) {
            return Ok(vs);
        }
        loop {
            vs.push(self.use_value()?);
            if self.eat_punct(close) {
                return Ok(vs);
            }
            self.punct(',')?;
        }
    }

    /// Defines a value named `name` (found on `line`) and returns it.
    fn define(&mut self, name: &str, line: usize) -> Result<ValueId, ParseError> {
        if let Some(&(_, at)) = self.visible.get(name) {
            return err(line, format!("`%{name}` is already defined (on line {at})"));
        }
        if self.params.contains_key(name) {
            return err(line, format!("`%{name}` is the name of a parameter"));
        }
        if self.next >= crate::validate::MAX_VALUE_ID {
            return err(line, "too many values");
        }
        let v = ValueId(self.next);
        self.next += 1;
        self.visible.insert(name.to_string(), (v, line));
        self.latest.insert(name.to_string(), v);
        self.first.entry(name.to_string()).or_insert(v);
        Ok(v)
    }

    /// Ends the scope of the names in `names`.
    fn end_scope(&mut self, names: &[String]) {
        for n in names {
            self.visible.remove(n);
        }
    }

    fn access(&mut self) -> Result<Access, ParseError> {
        let param = self.param_ref()?;
        self.punct('[')?;
        let indices = self.use_list(']')?;
        Ok(Access { param, indices })
    }

    fn kernel(&mut self) -> Result<Kernel, ParseError> {
        self.keyword("kernel")?;
        let name = match self.bump() {
            Tok::Global(s) => s,
            _ => {
                self.pos -= 1;
                return self.unexpected("a kernel name (`@name`)");
            }
        };
        self.punct('(')?;
        let mut params = Vec::new();
        if !self.eat_punct(')') {
            loop {
                let line = self.line();
                let pname = self.value_name()?;
                if self.params.contains_key(&pname) {
                    return err(line, format!("parameter `%{pname}` is declared twice"));
                }
                let index = u32::try_from(params.len())
                    .map_or_else(|_| err(line, "too many parameters"), Ok)?;
                self.params.insert(pname, index);
                self.punct(':')?;
                params.push(self.param_type()?);
                if self.eat_punct(')') {
                    break;
                }
                self.punct(',')?;
            }
        }
        self.punct('{')?;
        let (mut body, names) = self.block(0, false)?;
        self.end_scope(&names);
        self.punct('}')?;
        if *self.peek() != Tok::Eof {
            return self.unexpected("the end of the input after the kernel");
        }
        if !self.forward.is_empty() {
            let mut resolved = Vec::with_capacity(self.forward.len());
            for (name, line) in &self.forward {
                match self.first.get(name) {
                    Some(&v) => resolved.push(v),
                    None => return err(*line, format!("`%{name}` is never defined")),
                }
            }
            let first_placeholder = placeholder(resolved.len() - 1);
            for_each_value_mut(&mut body, &mut |v| {
                if *v >= first_placeholder {
                    *v = resolved[(u32::MAX - v.0) as usize];
                }
            });
        }
        Ok(Kernel { name, params, body })
    }

    /// Parses instructions up to `}` or `yield` (not consumed). Returns them and the names they
    /// define directly, whose scope the caller ends.
    fn block(
        &mut self,
        depth: usize,
        in_for: bool,
    ) -> Result<(Vec<Inst>, Vec<String>), ParseError> {
        let mut insts = Vec::new();
        let mut names = Vec::new();
        loop {
            match self.peek() {
                Tok::Punct('}') | Tok::Eof => return Ok((insts, names)),
                Tok::Word(w) if w == "yield" => {
                    if in_for {
                        return Ok((insts, names));
                    }
                    return self.fail("`yield` outside a `for` loop body");
                }
                _ => insts.push(self.inst(depth, &mut names)?),
            }
        }
    }

    fn inst(&mut self, depth: usize, names: &mut Vec<String>) -> Result<Inst, ParseError> {
        // Results.
        let mut result_names = Vec::new();
        if matches!(self.peek(), Tok::Value(_)) {
            loop {
                let line = self.line();
                let n = self.value_name()?;
                result_names.push((n, line));
                if self.eat_punct('=') {
                    break;
                }
                self.punct(',')?;
            }
        }
        let line = self.line();
        let opname = self.word("an operation")?;
        let op = match opname.as_str() {
            "const" => {
                let t = self.dtype()?;
                let lit_line = self.line();
                let lit = self.word("a constant")?;
                match parse_scalar(t, &lit) {
                    Some(s) => Op::Const(s),
                    None => return err(lit_line, format!("bad {t} constant `{lit}`")),
                }
            }
            "param" => Op::Param(self.param_ref()?),
            "select" => {
                let c = self.use_value()?;
                self.punct(',')?;
                let a = self.use_value()?;
                self.punct(',')?;
                Op::Select(c, a, self.use_value()?)
            }
            "fma" => {
                let a = self.use_value()?;
                self.punct(',')?;
                let b = self.use_value()?;
                self.punct(',')?;
                Op::Fma(a, b, self.use_value()?)
            }
            "cast" => {
                let t = self.dtype()?;
                Op::Cast(t, self.use_value()?)
            }
            "bitcast" => {
                let t = self.dtype()?;
                Op::Bitcast(t, self.use_value()?)
            }
            "load" => Op::Load(self.access()?),
            "store" => {
                let a = self.access()?;
                self.punct(',')?;
                Op::Store(a, self.use_value()?)
            }
            "reduce" => {
                let op = self.reduce_op()?;
                let a = self.access()?;
                self.punct(',')?;
                Op::Reduce(a, op, self.use_value()?)
            }
            "extent" | "origin" => {
                let param = self.param_ref()?;
                self.punct(',')?;
                let dim = self.u32_lit("a dimension")?;
                if opname == "extent" {
                    Op::Extent { param, dim }
                } else {
                    Op::Origin { param, dim }
                }
            }
            "parallel" => {
                if depth >= MAX_LOOP_DEPTH {
                    return err(line, format!("loops nest more than {MAX_LOOP_DEPTH} deep"));
                }
                let over = self.param_ref()?;
                self.punct('(')?;
                let mut index_names = Vec::new();
                if !self.eat_punct(')') {
                    loop {
                        let l = self.line();
                        index_names.push((self.value_name()?, l));
                        if self.eat_punct(')') {
                            break;
                        }
                        self.punct(',')?;
                    }
                }
                self.punct('{')?;
                let mut indices = Vec::new();
                let mut scope = Vec::new();
                for (n, l) in &index_names {
                    indices.push(self.define(n, *l)?);
                    scope.push(n.clone());
                }
                let (body, inner) = self.block(depth + 1, false)?;
                self.punct('}')?;
                self.end_scope(&inner);
                self.end_scope(&scope);
                Op::Parallel(ParallelLoop {
                    over,
                    indices,
                    body,
                })
            }
            "for" => {
                if depth >= MAX_LOOP_DEPTH {
                    return err(line, format!("loops nest more than {MAX_LOOP_DEPTH} deep"));
                }
                let ind_line = self.line();
                let ind_name = self.value_name()?;
                self.punct('=')?;
                let lo = self.use_value()?;
                self.keyword("to")?;
                let hi = self.use_value()?;
                let mut carried_names = Vec::new();
                let mut init = Vec::new();
                if self.is_word("iter") {
                    self.pos += 1;
                    self.punct('(')?;
                    if !self.eat_punct(')') {
                        loop {
                            let l = self.line();
                            carried_names.push((self.value_name()?, l));
                            self.punct('=')?;
                            init.push(self.use_value()?);
                            if self.eat_punct(')') {
                                break;
                            }
                            self.punct(',')?;
                        }
                    }
                }
                self.punct('{')?;
                let induction = self.define(&ind_name, ind_line)?;
                let mut scope = vec![ind_name];
                let mut carried = Vec::new();
                for (n, l) in &carried_names {
                    carried.push(self.define(n, *l)?);
                    scope.push(n.clone());
                }
                let (body, inner) = self.block(depth + 1, true)?;
                let yields = if self.is_word("yield") {
                    self.pos += 1;
                    if matches!(self.peek(), Tok::Value(_)) {
                        let mut ys = vec![self.use_value()?];
                        while self.eat_punct(',') {
                            ys.push(self.use_value()?);
                        }
                        ys
                    } else {
                        Vec::new()
                    }
                } else {
                    Vec::new()
                };
                self.punct('}')?;
                self.end_scope(&inner);
                self.end_scope(&scope);
                Op::For(ForLoop {
                    lo,
                    hi,
                    induction,
                    init,
                    carried,
                    body,
                    yields,
                })
            }
            other => {
                if let Some(op) = BinaryOp::from_name(other) {
                    let a = self.use_value()?;
                    self.punct(',')?;
                    Op::Binary(op, a, self.use_value()?)
                } else if let Some(op) = CmpOp::from_name(other) {
                    let a = self.use_value()?;
                    self.punct(',')?;
                    Op::Cmp(op, a, self.use_value()?)
                } else if let Some(op) = UnaryOp::from_name(other) {
                    Op::Unary(op, self.use_value()?)
                } else {
                    return err(line, format!("unknown operation `{other}`"));
                }
            }
        };
        let mut results = Vec::with_capacity(result_names.len());
        for (n, l) in result_names {
            results.push(self.define(&n, l)?);
            names.push(n);
        }
        Ok(Inst { results, op })
    }
}

/// Parses a constant's literal as printed by [`scalar_literal`] (floats may also be written
/// as `0x` bit patterns).
pub fn parse_scalar(dtype: DType, lit: &str) -> Option<Scalar> {
    fn float_chars(s: &str) -> bool {
        !s.is_empty()
            && s.bytes().any(|b| b.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    }
    let hex = lit.strip_prefix("0x").filter(|h| !h.is_empty());
    match dtype {
        DType::F32 => Some(Scalar::F32(match lit {
            "nan" => f32::NAN,
            "inf" | "+inf" => f32::INFINITY,
            "-inf" => f32::NEG_INFINITY,
            _ => match hex {
                Some(h) if h.len() <= 8 => f32::from_bits(u32::from_str_radix(h, 16).ok()?),
                Some(_) => return None,
                None if float_chars(lit) => lit.parse().ok()?,
                None => return None,
            },
        })),
        DType::F64 => Some(Scalar::F64(match lit {
            "nan" => f64::NAN,
            "inf" | "+inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => match hex {
                Some(h) if h.len() <= 16 => f64::from_bits(u64::from_str_radix(h, 16).ok()?),
                Some(_) => return None,
                None if float_chars(lit) => lit.parse().ok()?,
                None => return None,
            },
        })),
        DType::I32 => lit.parse().ok().map(Scalar::I32),
        DType::I64 => lit.parse().ok().map(Scalar::I64),
        DType::Bool => match lit {
            "true" => Some(Scalar::Bool(true)),
            "false" => Some(Scalar::Bool(false)),
            _ => None,
        },
        // No constant has an unsigned storage type.
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => None,
    }
}
