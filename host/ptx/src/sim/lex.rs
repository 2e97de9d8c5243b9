//! The PTX tokenizer: words (opcodes, directives, registers, labels, numbers) and punctuation,
//! each with its line; comments are dropped.

/// A token's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok<'s> {
    /// A run of letters, digits and `_ . % $` (or a quoted string, quotes included).
    Word(&'s str),
    /// One punctuation character.
    Punct(char),
}

/// A token and the line it starts on (from 1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'s> {
    /// The text.
    pub tok: Tok<'s>,
    /// Its line.
    pub line: u32,
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'%' | b'$')
}

/// Whether `word` is a decimal float literal cut at its exponent's sign (`1.5e`, then `-3`).
fn cut_exponent(word: &str) -> bool {
    let b = word.as_bytes();
    b.first().is_some_and(u8::is_ascii_digit)
        && matches!(b.last(), Some(b'e' | b'E'))
        && !word.starts_with("0x")
        && !word.starts_with("0X")
        && !word.starts_with("0f")
        && !word.starts_with("0d")
        && !word.starts_with("0F")
        && !word.starts_with("0D")
}

/// The tokens of `text`, or the line and description of what cannot be one.
pub(crate) fn lex(text: &str) -> Result<Vec<Token<'_>>, (u32, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1u32);
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            _ if c.is_ascii_whitespace() => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = line;
                i += 2;
                loop {
                    match b.get(i) {
                        None => return Err((start, "an unterminated `/*` comment".into())),
                        Some(b'*') if b.get(i + 1) == Some(&b'/') => {
                            i += 2;
                            break;
                        }
                        Some(b'\n') => line += 1,
                        Some(_) => {}
                    }
                    i += 1;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += 1;
                }
                if b.get(i) != Some(&b'"') {
                    return Err((line, "an unterminated string".into()));
                }
                i += 1;
                out.push(Token {
                    tok: Tok::Word(&text[start..i]),
                    line,
                });
            }
            _ if is_word(c) => {
                let start = i;
                while i < b.len() && is_word(b[i]) {
                    i += 1;
                    // `L2::256B`, `shared::cta`: a qualifier's `::` stays inside the word.
                    if b.get(i) == Some(&b':')
                        && b.get(i + 1) == Some(&b':')
                        && b.get(i + 2).is_some_and(|&n| is_word(n))
                    {
                        i += 2;
                    }
                    // `1.5e-3`: the exponent's sign belongs to the number.
                    if i < b.len() && matches!(b[i], b'-' | b'+') && cut_exponent(&text[start..i]) {
                        i += 1;
                    }
                }
                out.push(Token {
                    tok: Tok::Word(&text[start..i]),
                    line,
                });
            }
            b',' | b';' | b':' | b'[' | b']' | b'(' | b')' | b'{' | b'}' | b'@' | b'!' | b'+'
            | b'-' | b'<' | b'>' | b'|' => {
                out.push(Token {
                    tok: Tok::Punct(char::from(c)),
                    line,
                });
                i += 1;
            }
            _ => {
                let ch = text.get(i..).and_then(|s| s.chars().next()).unwrap_or('?');
                return Err((line, format!("unexpected character `{ch}`")));
            }
        }
    }
    Ok(out)
}
