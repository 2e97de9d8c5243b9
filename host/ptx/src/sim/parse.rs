//! The PTX parser: a module's header and entries into their decoded form ([`Entry`]), the
//! way the driver's JIT would take them. Registers, special registers, parameters and
//! immediates become slots of a register file, labels instruction indices; `decode` turns
//! each instruction into an [`Op`]. What the simulator does not model (`.local`, `.const`
//! and dynamic `.extern .shared` memory, `.func`, vector operands...) is refused here, with
//! its line.
//!
//! `.shared` arrays, of the module or of an entry, are laid out per entry in the block's
//! shared window (from [`SHARED_BASE`]): the module's arrays the entry names, then the
//! entry's own, in declaration order, each at its alignment; at most [`MAX_SHARED`] bytes
//! in all. An array's name stands for its address (a slot filled in once the layout is
//! known) in `mov` and in the addresses of `.shared` accesses.

use std::collections::HashMap;

use super::lex::{Tok, Token, lex};
use super::memory::SHARED_BASE;
use super::operand::operand;
pub(crate) use super::operand::{AddrBase, Operand, parse_int};
use super::ops::{Op, R, Ty};

/// The slots of `%tid.{x,y,z}`; then `%ntid` (+3), `%ctaid` (+6), `%nctaid` (+9).
pub(crate) const TID: usize = 0;
/// The slots of `%ntid.{x,y,z}`.
pub(crate) const NTID: usize = 3;
/// The slots of `%ctaid.{x,y,z}`.
pub(crate) const CTAID: usize = 6;
/// The slots of `%nctaid.{x,y,z}`.
pub(crate) const NCTAID: usize = 9;
/// The first parameter's slot.
pub(crate) const PARAMS: usize = 12;

/// The most slots (registers and constants) of one entry.
const MAX_SLOTS: usize = 1 << 20;

/// The most bytes of static shared memory a block may have (as on CUDA GPUs).
pub(crate) const MAX_SHARED: u64 = 48 << 10;

/// A `.shared` array as declared.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedDecl<'s> {
    pub name: &'s str,
    /// Its alignment in bytes: a power of two, at least its element's size.
    pub align: u64,
    /// Its size in bytes.
    pub len: u64,
    pub line: u32,
}

/// A shared array of an entry, laid out in the block's shared window.
#[derive(Clone, Debug)]
pub(crate) struct SharedArray {
    pub name: String,
    /// Its address in the window.
    pub base: u64,
    /// Its size in bytes.
    pub len: u64,
}

/// A shared array an entry may name: of the module or its own, and the slot holding its
/// address once an instruction names it.
pub(crate) struct SharedVar<'s> {
    pub decl: SharedDecl<'s>,
    pub module: bool,
    pub slot: Option<R>,
}

/// One `.entry` of a module, decoded.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The kernel the module came from (for messages).
    pub kernel: String,
    /// The entry's name.
    pub name: String,
    /// Its parameters' names and types, in order.
    pub params: Vec<(String, Ty)>,
    /// Its instructions; the last is a `ret`.
    pub code: Vec<Op>,
    /// The source line of each instruction.
    pub lines: Vec<u32>,
    /// A thread's register file before it starts: zeros, and the constants.
    pub template: Vec<u64>,
    /// `.maxntid`: the most threads per block.
    pub max_threads: Option<u64>,
    /// `.reqntid`: the block it must be launched with.
    pub req_threads: Option<[u32; 3]>,
    /// Its shared arrays, by address (empty: the entry uses no shared memory).
    pub shared: Vec<SharedArray>,
    /// Whether it has a barrier (`bar.sync`): then a block's threads run in lockstep from
    /// barrier to barrier, each with its own register file; otherwise one after another.
    pub barriers: bool,
}

/// A declared register (or special register, read-only).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reg {
    pub slot: R,
    pub ty: Ty,
    pub writable: bool,
}

/// What the parser refused: where and why.
#[derive(Debug)]
pub(crate) struct ParseError {
    pub line: u32,
    pub entry: Option<String>,
    pub message: String,
}

type Res<T> = Result<T, (u32, String)>;

/// The state of one entry being decoded (see `decode` for the instructions).
pub(crate) struct Builder<'s> {
    pub regs: HashMap<String, Reg>,
    pub params: HashMap<&'s str, (R, Ty)>,
    pub template: Vec<u64>,
    pub consts: HashMap<u64, R>,
    pub code: Vec<Op>,
    pub lines: Vec<u32>,
    pub labels: HashMap<&'s str, u32>,
    /// Branches to patch: instruction, label, line.
    pub fixups: Vec<(usize, &'s str, u32)>,
    /// The shared arrays it may name: the module's, then its own.
    pub shared: Vec<SharedVar<'s>>,
}

impl<'s> Builder<'s> {
    fn new(params: &[(&'s str, Ty)], module_shared: &[SharedDecl<'s>]) -> Self {
        let mut regs = HashMap::new();
        for (base, name) in [
            (TID, "tid"),
            (NTID, "ntid"),
            (CTAID, "ctaid"),
            (NCTAID, "nctaid"),
        ] {
            for (k, axis) in ["x", "y", "z"].iter().enumerate() {
                let reg = Reg {
                    slot: (base + k) as R,
                    ty: Ty::U32,
                    writable: false,
                };
                regs.insert(format!("%{name}.{axis}"), reg);
            }
        }
        let mut map = HashMap::new();
        for (i, &(name, ty)) in params.iter().enumerate() {
            map.insert(name, ((PARAMS + i) as R, ty));
        }
        Builder {
            regs,
            params: map,
            template: vec![0; PARAMS + params.len()],
            consts: HashMap::new(),
            code: Vec::new(),
            lines: Vec::new(),
            labels: HashMap::new(),
            fixups: Vec::new(),
            shared: module_shared
                .iter()
                .map(|&decl| SharedVar {
                    decl,
                    module: true,
                    slot: None,
                })
                .collect(),
        }
    }

    /// The slot holding the address of the shared array `name` (its own, else the
    /// module's), if there is one.
    pub(crate) fn shared_slot(&mut self, name: &str) -> Result<Option<R>, String> {
        let Some(k) = self.shared.iter().rposition(|v| v.decl.name == name) else {
            return Ok(None);
        };
        if let Some(slot) = self.shared[k].slot {
            return Ok(Some(slot));
        }
        let slot = self.slot(0)?;
        self.shared[k].slot = Some(slot);
        Ok(Some(slot))
    }

    /// Lays out the shared arrays (the module's that the entry names, then its own) and
    /// fills the slots of their addresses.
    fn layout_shared(&mut self) -> Res<Vec<SharedArray>> {
        let mut next = SHARED_BASE;
        let mut out = Vec::new();
        for v in &self.shared {
            if v.module && v.slot.is_none() {
                continue;
            }
            let base = next.next_multiple_of(v.decl.align);
            next = base + v.decl.len;
            if next - SHARED_BASE > MAX_SHARED {
                return Err((
                    v.decl.line,
                    format!(
                        "`{}`: the entry's shared arrays take more than the {MAX_SHARED} bytes \
                         a block may have",
                        v.decl.name
                    ),
                ));
            }
            if let Some(slot) = v.slot {
                self.template[slot as usize] = base;
            }
            out.push(SharedArray {
                name: v.decl.name.to_string(),
                base,
                len: v.decl.len,
            });
        }
        Ok(out)
    }

    /// A new slot holding `value` before the thread starts.
    pub(crate) fn slot(&mut self, value: u64) -> Result<R, String> {
        if self.template.len() >= MAX_SLOTS {
            return Err(format!("more than {MAX_SLOTS} registers"));
        }
        self.template.push(value);
        Ok((self.template.len() - 1) as R)
    }

    /// The slot of the constant `bits`.
    pub(crate) fn konst(&mut self, bits: u64) -> Result<R, String> {
        if let Some(&r) = self.consts.get(&bits) {
            return Ok(r);
        }
        let r = self.slot(bits)?;
        self.consts.insert(bits, r);
        Ok(r)
    }

    fn declare(&mut self, name: String, ty: Ty) -> Result<(), String> {
        if self.regs.contains_key(&name)
            || self.params.contains_key(name.as_str())
            || self.shared.iter().any(|v| !v.module && v.decl.name == name)
        {
            return Err(format!("`{name}` is declared twice"));
        }
        let slot = self.slot(0)?;
        self.regs.insert(
            name,
            Reg {
                slot,
                ty,
                writable: true,
            },
        );
        Ok(())
    }

    pub(crate) fn push(&mut self, op: Op, line: u32) {
        self.code.push(op);
        self.lines.push(line);
    }
}

struct Parser<'s> {
    toks: Vec<Token<'s>>,
    i: usize,
}

impl<'s> Parser<'s> {
    fn peek(&self) -> Option<Tok<'s>> {
        self.toks.get(self.i).map(|t| t.tok)
    }

    fn peek_at(&self, k: usize) -> Option<Tok<'s>> {
        self.toks.get(self.i + k).map(|t| t.tok)
    }

    /// The current token's line (the last one's at the end).
    fn line(&self) -> u32 {
        self.toks
            .get(self.i)
            .or(self.toks.last())
            .map_or(1, |t| t.line)
    }

    fn next(&mut self) -> Option<Tok<'s>> {
        let t = self.peek();
        self.i += 1;
        t
    }

    fn err<T>(&self, message: impl Into<String>) -> Res<T> {
        Err((self.line(), message.into()))
    }

    fn word(&mut self, what: &str) -> Res<&'s str> {
        match self.peek() {
            Some(Tok::Word(w)) => {
                self.i += 1;
                Ok(w)
            }
            Some(Tok::Punct(c)) => self.err(format!("expected {what}, found `{c}`")),
            None => self.err(format!("expected {what}, found the end of the module")),
        }
    }

    fn punct(&mut self, c: char) -> Res<()> {
        match self.peek() {
            Some(Tok::Punct(p)) if p == c => {
                self.i += 1;
                Ok(())
            }
            Some(Tok::Word(w)) => self.err(format!("expected `{c}`, found `{w}`")),
            Some(Tok::Punct(p)) => self.err(format!("expected `{c}`, found `{p}`")),
            None => self.err(format!("expected `{c}`, found the end of the module")),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(Tok::Punct(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn number(&mut self, what: &str) -> Res<u64> {
        let w = self.word(what)?;
        parse_int(w).ok_or((self.line(), format!("expected {what}, found `{w}`")))
    }
}

/// Parses a module: every entry, decoded.
pub(crate) fn parse_module(kernel: &str, text: &str) -> Result<Vec<Entry>, ParseError> {
    let toks = lex(text).map_err(|(line, message)| ParseError {
        line,
        entry: None,
        message,
    })?;
    let mut p = Parser { toks, i: 0 };
    let plain = |(line, message): (u32, String)| ParseError {
        line,
        entry: None,
        message,
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut shared: Vec<SharedDecl<'_>> = Vec::new();
    let (mut version, mut target, mut address) = (false, false, false);
    while let Some(t) = p.peek() {
        match t {
            Tok::Word(".version") => {
                p.next();
                let v = p.word("a version").map_err(plain)?;
                let ok = v
                    .split_once('.')
                    .is_some_and(|(a, b)| parse_int(a).is_some() && parse_int(b).is_some());
                if !ok {
                    return Err(plain((p.line(), format!("a malformed version `{v}`"))));
                }
                version = true;
            }
            Tok::Word(".target") => {
                p.next();
                let line = p.line();
                p.word("a target").map_err(plain)?;
                while p.peek() == Some(Tok::Punct(','))
                    && p.toks.get(p.i).map(|t| t.line) == Some(line)
                {
                    p.next();
                    p.word("a target option").map_err(plain)?;
                }
                target = true;
            }
            Tok::Word(".address_size") => {
                p.next();
                let n = p.number("an address size").map_err(plain)?;
                if n != 64 {
                    return Err(plain((
                        p.line(),
                        format!("`.address_size {n}`: only 64-bit addresses are simulated"),
                    )));
                }
                address = true;
            }
            Tok::Word(".visible" | ".entry") => {
                if !(version && target && address) {
                    return Err(plain((
                        p.line(),
                        "an entry before the module's `.version`, `.target` and `.address_size 64`"
                            .to_string(),
                    )));
                }
                let entry = parse_entry(&mut p, kernel, &shared)?;
                if entries.iter().any(|e| e.name == entry.name) {
                    return Err(ParseError {
                        line: p.line(),
                        entry: Some(entry.name.clone()),
                        message: format!("a second entry `{}`", entry.name),
                    });
                }
                entries.push(entry);
            }
            Tok::Word(".extern") if p.peek_at(1) == Some(Tok::Word(".shared")) => {
                return Err(plain((
                    p.line(),
                    "`.extern .shared`: dynamic shared memory is not simulated".to_string(),
                )));
            }
            Tok::Word(".shared") => {
                p.next();
                for d in shared_decl(&mut p).map_err(plain)? {
                    if shared.iter().any(|s| s.name == d.name) {
                        return Err(plain((d.line, format!("a second `.shared` `{}`", d.name))));
                    }
                    shared.push(d);
                }
            }
            Tok::Word(w @ (".func" | ".weak" | ".extern")) => {
                return Err(plain((
                    p.line(),
                    format!("`{w}`: device functions are not simulated"),
                )));
            }
            Tok::Word(w @ (".global" | ".const" | ".local")) => {
                return Err(plain((
                    p.line(),
                    format!("`{w}`: module-level variables are not simulated"),
                )));
            }
            Tok::Word(w) => return Err(plain((p.line(), format!("unexpected `{w}`")))),
            Tok::Punct(c) => return Err(plain((p.line(), format!("unexpected `{c}`")))),
        }
    }
    if !version {
        return Err(plain((1, "the module has no `.version`".to_string())));
    }
    Ok(entries)
}

/// `[.align N] .TYPE NAME[N]... {, NAME[N]...};` (after `.shared`): the arrays declared.
fn shared_decl<'s>(p: &mut Parser<'s>) -> Res<Vec<SharedDecl<'s>>> {
    let mut align = None;
    if p.peek() == Some(Tok::Word(".align")) {
        p.next();
        let n = p.number("an alignment")?;
        if n == 0 || !n.is_power_of_two() || n > MAX_SHARED {
            return p.err(format!("a malformed alignment {n}"));
        }
        align = Some(n);
    }
    let t = p.word("a type")?;
    let ty = t
        .strip_prefix('.')
        .and_then(Ty::parse)
        .filter(|t| t.kind != super::ops::Kind::Pred);
    let Some(ty) = ty else {
        return p.err(format!("unsupported shared array type `{t}`"));
    };
    let size = u64::from(ty.bits / 8);
    let mut out = Vec::new();
    loop {
        let line = p.line();
        let name = p.word("an array name")?;
        if name.starts_with('.') || name.starts_with(|c: char| c.is_ascii_digit()) {
            return p.err(format!("a malformed array name `{name}`"));
        }
        let mut len = size;
        while p.eat('[') {
            if p.peek() == Some(Tok::Punct(']')) {
                return p.err(format!(
                    "`{name}[]`: dynamic shared memory is not simulated"
                ));
            }
            let n = p.number("an array length")?;
            p.punct(']')?;
            len = len
                .checked_mul(n)
                .filter(|&l| l <= MAX_SHARED)
                .ok_or((line, format!("`{name}`: more than {MAX_SHARED} bytes")))?;
        }
        if len == 0 {
            return Err((line, format!("`{name}`: an array of 0 bytes")));
        }
        out.push(SharedDecl {
            name,
            align: align.unwrap_or(size).max(size),
            len,
            line,
        });
        if p.eat(';') {
            return Ok(out);
        }
        p.punct(',')?;
    }
}

/// Parses `[.visible] .entry NAME(PARAMS) [DIRECTIVES] { BODY }`, in a module whose
/// `.shared` arrays so far are `shared`.
fn parse_entry<'s>(
    p: &mut Parser<'s>,
    kernel: &str,
    shared: &[SharedDecl<'s>],
) -> Result<Entry, ParseError> {
    let plain = |(line, message): (u32, String)| ParseError {
        line,
        entry: None,
        message,
    };
    if p.peek() == Some(Tok::Word(".visible")) {
        p.next();
    }
    match p.word("`.entry`").map_err(plain)? {
        ".entry" => {}
        w => {
            return Err(plain((
                p.line(),
                format!("`{w}`: only `.entry` is simulated"),
            )));
        }
    }
    let name = p.word("the entry's name").map_err(plain)?;
    let named = |(line, message): (u32, String)| ParseError {
        line,
        entry: Some(name.to_string()),
        message,
    };
    let mut params: Vec<(&str, Ty)> = Vec::new();
    p.punct('(').map_err(named)?;
    if !p.eat(')') {
        loop {
            match p.word("`.param`").map_err(named)? {
                ".param" => {}
                w => return Err(named((p.line(), format!("`{w}`: expected `.param`")))),
            }
            let t = p.word("a parameter type").map_err(named)?;
            let ty = t
                .strip_prefix('.')
                .and_then(Ty::parse)
                .filter(|t| t.is_int() || t.kind == super::ops::Kind::F);
            let Some(ty) = ty else {
                return Err(named((
                    p.line(),
                    format!("unsupported parameter type `{t}`"),
                )));
            };
            let pname = p.word("a parameter name").map_err(named)?;
            if params.iter().any(|(n, _)| *n == pname) {
                return Err(named((p.line(), format!("a second parameter `{pname}`"))));
            }
            params.push((pname, ty));
            if p.eat(')') {
                break;
            }
            p.punct(',').map_err(named)?;
        }
    }
    let (mut max_threads, mut req_threads) = (None, None);
    loop {
        match p.peek() {
            Some(Tok::Word(d @ (".maxntid" | ".reqntid"))) => {
                p.next();
                let mut dims = [1u32; 3];
                for (k, dim) in dims.iter_mut().enumerate() {
                    if k > 0 && !p.eat(',') {
                        break;
                    }
                    let n = p.number("a thread count").map_err(named)?;
                    *dim = u32::try_from(n)
                        .map_err(|_| named((p.line(), format!("`{d}` {n} is too large"))))?;
                }
                if d == ".maxntid" {
                    max_threads = Some(dims.iter().map(|&d| u64::from(d)).product());
                } else {
                    req_threads = Some(dims);
                }
            }
            Some(Tok::Word(".minnctapersm" | ".maxnctapersm" | ".maxnreg")) => {
                p.next();
                p.number("a count").map_err(named)?;
            }
            _ => break,
        }
    }
    p.punct('{').map_err(named)?;
    let mut b = Builder::new(&params, shared);
    body(p, &mut b).map_err(named)?;
    // Falling off the end returns.
    let end = p.line();
    b.push(Op::Ret, end);
    for &(at, label, line) in &b.fixups {
        let Some(&target) = b.labels.get(label) else {
            return Err(named((line, format!("unknown label `{label}`"))));
        };
        match &mut b.code[at] {
            Op::Bra { target: t }
            | Op::BraIf { target: t, .. }
            | Op::BraIfNot { target: t, .. } => {
                *t = target;
            }
            _ => {}
        }
    }
    let shared = b.layout_shared().map_err(named)?;
    let barriers = b.code.contains(&Op::Bar);
    Ok(Entry {
        kernel: kernel.to_string(),
        name: name.to_string(),
        params: params.iter().map(|&(n, t)| (n.to_string(), t)).collect(),
        code: b.code,
        lines: b.lines,
        template: b.template,
        max_threads,
        req_threads,
        shared,
        barriers,
    })
}

/// The statements of an entry's body, through its closing `}`.
fn body<'s>(p: &mut Parser<'s>, b: &mut Builder<'s>) -> Res<()> {
    loop {
        let line = p.line();
        match p.peek() {
            None => return p.err("the entry's body has no closing `}`"),
            Some(Tok::Punct('}')) => {
                p.next();
                return Ok(());
            }
            Some(Tok::Punct('{')) => return p.err("nested blocks are not simulated"),
            Some(Tok::Word(".reg")) => {
                p.next();
                declaration(p, b)?;
            }
            Some(Tok::Word(".shared")) => {
                p.next();
                for d in shared_decl(p)? {
                    let clash = b.regs.contains_key(d.name)
                        || b.params.contains_key(d.name)
                        || b.shared.iter().any(|v| !v.module && v.decl.name == d.name);
                    if clash {
                        return Err((d.line, format!("`{}` is declared twice", d.name)));
                    }
                    b.shared.push(SharedVar {
                        decl: d,
                        module: false,
                        slot: None,
                    });
                }
            }
            Some(Tok::Word(w @ (".local" | ".const" | ".global" | ".param"))) => {
                return p.err(format!(
                    "`{w}` variables are not simulated (the simulator models global and shared \
                     memory only)"
                ));
            }
            Some(Tok::Word(".pragma")) => {
                while !matches!(p.next(), Some(Tok::Punct(';')) | None) {}
            }
            Some(Tok::Word(w)) if p.peek_at(1) == Some(Tok::Punct(':')) => {
                p.next();
                p.next();
                if b.labels.insert(w, b.code.len() as u32).is_some() {
                    return Err((line, format!("the label `{w}` is defined twice")));
                }
            }
            Some(Tok::Word(w)) if w.starts_with('.') => {
                return p.err(format!("unsupported directive `{w}`"));
            }
            Some(_) => statement(p, b)?,
        }
    }
}

/// `.reg .TYPE NAME[<N>] {, NAME[<N>]};` (after `.reg`).
fn declaration(p: &mut Parser<'_>, b: &mut Builder<'_>) -> Res<()> {
    let t = p.word("a register type")?;
    let Some(ty) = t.strip_prefix('.').and_then(Ty::parse) else {
        return p.err(format!("unsupported register type `{t}`"));
    };
    loop {
        let name = p.word("a register name")?;
        if name.starts_with(['.', '$']) || name.starts_with(|c: char| c.is_ascii_digit()) {
            return p.err(format!("a malformed register name `{name}`"));
        }
        let line = p.line();
        if p.eat('<') {
            let n = p.number("a register count")?;
            p.punct('>')?;
            if n > MAX_SLOTS as u64 {
                return Err((line, format!("`{name}<{n}>`: too many registers")));
            }
            for k in 0..n {
                b.declare(format!("{name}{k}"), ty).map_err(|e| (line, e))?;
            }
        } else {
            b.declare(name.to_string(), ty).map_err(|e| (line, e))?;
        }
        if p.eat(';') {
            return Ok(());
        }
        p.punct(',')?;
    }
}

/// An instruction: `[@[!]PRED] OPCODE OPERANDS;`.
fn statement<'s>(p: &mut Parser<'s>, b: &mut Builder<'s>) -> Res<()> {
    let line = p.line();
    let mut guard = None;
    if p.eat('@') {
        let neg = p.eat('!');
        guard = Some((neg, p.word("a predicate")?));
    }
    let opcode = p.word("an instruction")?;
    let start = p.i;
    loop {
        match p.next() {
            Some(Tok::Punct(';')) => break,
            Some(Tok::Punct('{')) => {
                return Err((line, "vector operands are not simulated".to_string()));
            }
            Some(Tok::Punct('}')) | None => return Err((line, "a missing `;`".to_string())),
            Some(_) => {}
        }
    }
    let toks = &p.toks[start..p.i - 1];
    let mut operands = Vec::new();
    if !toks.is_empty() {
        let mut depth = 0i32;
        let mut from = 0;
        for (k, t) in toks.iter().enumerate() {
            match t.tok {
                Tok::Punct('[') => depth += 1,
                Tok::Punct(']') => depth -= 1,
                Tok::Punct(',') if depth == 0 => {
                    operands.push(operand(&toks[from..k]).map_err(|e| (line, e))?);
                    from = k + 1;
                }
                _ => {}
            }
        }
        operands.push(operand(&toks[from..]).map_err(|e| (line, e))?);
    }
    b.statement(guard, opcode, &operands, line)
        .map_err(|e| (line, e))
}
