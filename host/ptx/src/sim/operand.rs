//! Operands as written (registers and labels, literals, addresses), from an instruction's
//! tokens; integer literals.

use super::lex::{Tok, Token};

/// An operand as written.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operand<'s> {
    /// A register, label or parameter name.
    Sym(&'s str),
    /// A literal, possibly negated.
    Imm { neg: bool, text: &'s str },
    /// `[base+off]`.
    Addr { base: AddrBase<'s>, off: i64 },
}

/// The base of an address operand.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AddrBase<'s> {
    Sym(&'s str),
    Imm(u64),
}

/// An integer literal's magnitude: decimal, `0x` hex, `0b` binary, or octal with a leading
/// `0`; an optional `U` suffix.
pub(crate) fn parse_int(w: &str) -> Option<u64> {
    let w = w.strip_suffix(['U', 'u']).unwrap_or(w);
    let (digits, radix) = if let Some(h) = w.strip_prefix("0x").or(w.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = w.strip_prefix("0b").or(w.strip_prefix("0B")) {
        (b, 2)
    } else if w.len() > 1 && w.starts_with('0') {
        (&w[1..], 8)
    } else {
        (w, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// The text of some tokens, for messages.
fn show(toks: &[Token<'_>]) -> String {
    toks.iter()
        .map(|t| match t.tok {
            Tok::Word(w) => w.to_string(),
            Tok::Punct(c) => c.to_string(),
        })
        .collect()
}

fn is_number(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_digit())
}

/// One operand from its tokens.
pub(crate) fn operand<'s>(toks: &[Token<'s>]) -> Result<Operand<'s>, String> {
    let words: Vec<Tok<'s>> = toks.iter().map(|t| t.tok).collect();
    match words.as_slice() {
        [Tok::Word(w)] if is_number(w) => Ok(Operand::Imm {
            neg: false,
            text: w,
        }),
        [Tok::Word(w)] => Ok(Operand::Sym(w)),
        [Tok::Punct('-'), Tok::Word(w)] if is_number(w) => Ok(Operand::Imm { neg: true, text: w }),
        [Tok::Punct('['), inner @ .., Tok::Punct(']')] => {
            let base = |w: &'s str| -> Result<AddrBase<'s>, String> {
                if is_number(w) {
                    parse_int(w)
                        .map(AddrBase::Imm)
                        .ok_or_else(|| format!("a malformed address `{w}`"))
                } else {
                    Ok(AddrBase::Sym(w))
                }
            };
            let off = |w: &str, neg: bool| -> Result<i64, String> {
                let v = parse_int(w)
                    .and_then(|v| i64::try_from(v).ok())
                    .ok_or_else(|| format!("a malformed offset `{w}`"))?;
                Ok(if neg { -v } else { v })
            };
            let (base, off) = match inner {
                [Tok::Word(w)] => (base(w)?, 0),
                [Tok::Word(w), Tok::Punct('+'), Tok::Word(n)] => (base(w)?, off(n, false)?),
                [Tok::Word(w), Tok::Punct('+'), Tok::Punct('-'), Tok::Word(n)]
                | [Tok::Word(w), Tok::Punct('-'), Tok::Word(n)] => (base(w)?, off(n, true)?),
                _ => return Err(format!("a malformed address `{}`", show(toks))),
            };
            Ok(Operand::Addr { base, off })
        }
        [Tok::Punct('!'), ..] => Err(format!(
            "negated operands are not simulated: `{}`",
            show(toks)
        )),
        [] => Err("an empty operand".to_string()),
        _ => Err(format!("a malformed operand `{}`", show(toks))),
    }
}
