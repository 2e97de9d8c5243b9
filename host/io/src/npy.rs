//! NumPy's `.npy` format: a writer (format version 1.0) and a matching reader.
//!
//! A file is the magic `\x93NUMPY`, the version bytes `1 0`, a little-endian `u16` header
//! length, and an ASCII header — a Python dict literal such as
//! `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }` — padded with spaces and a
//! final newline so that the data starts at a multiple of 64 bytes; then the elements, in C
//! order. A 0-d array has shape `()` and one element.
//!
//! Element types: `<f8` (f64), `<f4` (f32), `<i8` (i64), `<i4` (i32), `|b1` (bool, one byte
//! 0 or 1), `<c16` and `<c8` (complex128 and complex64: each element its real part, then its
//! imaginary part), `|u1`, `<u2`, `<u4` and `<u8` (uint8 .. uint64), all little-endian. The reader also takes versions 2.0 and 3.0 (a `u32` header
//! length), but only C order and the element types above.

use std::path::Path;

use crate::{Error, Result};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The elements of an array, in C order.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    /// `<f8`.
    F64(Vec<f64>),
    /// `<f4`.
    F32(Vec<f32>),
    /// `<i8`.
    I64(Vec<i64>),
    /// `<i4`.
    I32(Vec<i32>),
    /// `|b1`.
    Bool(Vec<bool>),
    /// `<c16` (NumPy's `complex128`): `[re, im]` pairs.
    C128(Vec<[f64; 2]>),
    /// `<c8` (NumPy's `complex64`): `[re, im]` pairs.
    C64(Vec<[f32; 2]>),
    /// `|u1` (NumPy's `uint8`).
    U8(Vec<u8>),
    /// `<u2` (NumPy's `uint16`).
    U16(Vec<u16>),
    /// `<u4` (NumPy's `uint32`).
    U32(Vec<u32>),
    /// `<u8` (NumPy's `uint64`).
    U64(Vec<u64>),
}

impl NpyData {
    /// The type string of the `descr` header field.
    pub fn descr(&self) -> &'static str {
        match self {
            NpyData::F64(_) => "<f8",
            NpyData::F32(_) => "<f4",
            NpyData::I64(_) => "<i8",
            NpyData::I32(_) => "<i4",
            NpyData::Bool(_) => "|b1",
            NpyData::C128(_) => "<c16",
            NpyData::C64(_) => "<c8",
            NpyData::U8(_) => "|u1",
            NpyData::U16(_) => "<u2",
            NpyData::U32(_) => "<u4",
            NpyData::U64(_) => "<u8",
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            NpyData::F64(v) => v.len(),
            NpyData::F32(v) => v.len(),
            NpyData::I64(v) => v.len(),
            NpyData::I32(v) => v.len(),
            NpyData::Bool(v) => v.len(),
            NpyData::C128(v) => v.len(),
            NpyData::C64(v) => v.len(),
            NpyData::U8(v) => v.len(),
            NpyData::U16(v) => v.len(),
            NpyData::U32(v) => v.len(),
            NpyData::U64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements converted to f64 (bools as 0 and 1; complex numbers as their real parts,
    /// as NumPy's `astype(float)` takes them).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            NpyData::F64(v) => v.clone(),
            NpyData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            NpyData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
            NpyData::C128(v) => v.iter().map(|x| x[0]).collect(),
            NpyData::C64(v) => v.iter().map(|x| f64::from(x[0])).collect(),
            NpyData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::U64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    /// The elements as little-endian bytes, C order (NumPy's `tobytes()`).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            NpyData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
            NpyData::C128(v) => v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::C64(v) => v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::U8(v) => v.clone(),
            NpyData::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            NpyData::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

/// An array read from or written to a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Npy {
    /// The shape (empty for a 0-d array).
    pub shape: Vec<u64>,
    /// The elements, in C order.
    pub data: NpyData,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Npy {
        source_name: "<bytes>".into(),
        message: message.into(),
    }
}

/// The header dict for this element type and shape, as NumPy writes it.
fn header_dict(descr: &str, shape: &[u64]) -> String {
    let shape = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    };
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
}

impl Npy {
    /// An array of this shape; fails if the element count does not match the shape.
    pub fn new(shape: &[u64], data: NpyData) -> Result<Npy> {
        let count = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
        if count != data.len() as u64 {
            return Err(invalid(format!(
                "shape {shape:?} holds {count} elements, the data has {}",
                data.len()
            )));
        }
        Ok(Npy {
            shape: shape.to_vec(),
            data,
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The file's bytes (format version 1.0).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut header = header_dict(self.data.descr(), &self.shape);
        // magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
        let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
        header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
        header.push('\n');
        let len = u16::try_from(header.len())
            .map_err(|_| invalid("the .npy header is too long for format version 1.0"))?;
        let mut out = Vec::with_capacity(10 + header.len() + self.data.len() * 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&self.data.to_bytes());
        Ok(out)
    }

    /// Parses a file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Npy> {
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err(invalid("not a .npy file (bad magic)"));
        }
        let (header_len, start): (usize, usize) = match bytes[6] {
            1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
            2 | 3 if bytes.len() >= 12 => {
                let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
                let len = usize::try_from(len).map_err(|_| invalid("header too long"))?;
                (len, 12)
            }
            v => return Err(invalid(format!("unsupported .npy version {v}"))),
        };
        let end = start
            .checked_add(header_len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| invalid("truncated .npy header"))?;
        let header = std::str::from_utf8(&bytes[start..end])
            .map_err(|_| invalid("the .npy header is not text"))?;
        let descr = quoted_value(header, "descr")?;
        let fortran = field(header, "fortran_order")?;
        if fortran.starts_with("True") {
            return Err(invalid("Fortran-order .npy files are not supported"));
        }
        if !fortran.starts_with("False") {
            return Err(invalid("bad fortran_order in the .npy header"));
        }
        let shape = parse_shape(field(header, "shape")?)?;
        let count = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .and_then(|c| usize::try_from(c).ok())
            .ok_or_else(|| invalid("the .npy shape overflows"))?;
        let body = &bytes[end..];
        let size = match descr {
            "<c16" => 16,
            "<f8" | "<i8" | "<c8" | "<u8" => 8,
            "<f4" | "<i4" | "<u4" => 4,
            "<u2" => 2,
            "|b1" | "|u1" => 1,
            other => return Err(invalid(format!("unsupported .npy dtype `{other}`"))),
        };
        if count.checked_mul(size) != Some(body.len()) {
            return Err(invalid(format!(
                "the .npy data has {} bytes, shape {shape:?} of `{descr}` needs {}",
                body.len(),
                count.saturating_mul(size)
            )));
        }
        let data = match descr {
            "<f8" => NpyData::F64(words(body, f64::from_le_bytes)),
            "<i8" => NpyData::I64(words(body, i64::from_le_bytes)),
            "<f4" => NpyData::F32(words(body, f32::from_le_bytes)),
            "<i4" => NpyData::I32(words(body, i32::from_le_bytes)),
            "<c16" => NpyData::C128(pairs(words(body, f64::from_le_bytes))),
            "<c8" => NpyData::C64(pairs(words(body, f32::from_le_bytes))),
            "<u8" => NpyData::U64(words(body, u64::from_le_bytes)),
            "<u4" => NpyData::U32(words(body, u32::from_le_bytes)),
            "<u2" => NpyData::U16(words(body, u16::from_le_bytes)),
            "|u1" => NpyData::U8(body.to_vec()),
            _ => NpyData::Bool(body.iter().map(|&b| b != 0).collect()),
        };
        Ok(Npy { shape, data })
    }
}

fn words<const N: usize, T>(body: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    body.chunks_exact(N)
        .map(|c| {
            let mut w = [0u8; N];
            w.copy_from_slice(c);
            f(w)
        })
        .collect()
}

/// Consecutive `[re, im]` pairs of `parts`.
fn pairs<T: Copy>(parts: Vec<T>) -> Vec<[T; 2]> {
    parts.chunks_exact(2).map(|p| [p[0], p[1]]).collect()
}

/// The text after `'key':` in the header dict.
fn field<'a>(header: &'a str, key: &str) -> Result<&'a str> {
    let pat = format!("'{key}':");
    let at = header
        .find(&pat)
        .ok_or_else(|| invalid(format!("the .npy header has no `{key}`")))?;
    Ok(header[at + pat.len()..].trim_start())
}

/// The quoted string value of `key`.
fn quoted_value<'a>(header: &'a str, key: &str) -> Result<&'a str> {
    let rest = field(header, key)?;
    let quote = rest
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"')
        .ok_or_else(|| invalid(format!("`{key}` is not a string")))?;
    let rest = &rest[1..];
    let end = rest
        .find(quote)
        .ok_or_else(|| invalid(format!("unterminated `{key}`")))?;
    Ok(&rest[..end])
}

/// Parses `(a, b, ...)` (the text may continue after the closing parenthesis).
fn parse_shape(text: &str) -> Result<Vec<u64>> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.find(')').map(|e| &t[..e]))
        .ok_or_else(|| invalid("bad shape in the .npy header"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| invalid(format!("bad dimension `{s}` in the .npy header")))
        })
        .collect()
}

/// Writes an array to `path` (format version 1.0).
pub fn write(path: impl AsRef<Path>, shape: &[u64], data: NpyData) -> Result<()> {
    let path = path.as_ref();
    let bytes = Npy::new(shape, data)?.to_bytes()?;
    std::fs::write(path, bytes).map_err(|source| Error::Io {
        context: format!("cannot write {}", path.display()),
        source,
    })
}

/// Reads an array from `path`.
pub fn read(path: impl AsRef<Path>) -> Result<Npy> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        context: format!("cannot read {}", path.display()),
        source,
    })?;
    Npy::from_bytes(&bytes).map_err(|e| match e {
        Error::Npy { message, .. } => Error::Npy {
            source_name: path.display().to_string(),
            message,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(shape: &[u64], data: NpyData) -> Vec<u8> {
        let npy = Npy::new(shape, data).expect("shape matches");
        let bytes = npy.to_bytes().expect("encodes");
        let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!((10 + header_len) % 64, 0, "data must start 64-aligned");
        assert_eq!(bytes[10 + header_len - 1], b'\n');
        assert_eq!(Npy::from_bytes(&bytes).expect("decodes"), npy);
        bytes
    }

    #[test]
    fn headers_are_numpys() {
        let b = roundtrip(&[3], NpyData::F64(vec![1.0, -2.5, 3.0]));
        let text = String::from_utf8_lossy(&b[10..74]).into_owned();
        assert!(
            text.starts_with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"),
            "{text}"
        );
        let b = roundtrip(&[], NpyData::F64(vec![0.25]));
        assert!(String::from_utf8_lossy(&b).contains("'shape': (), }"));
        let b = roundtrip(&[2, 3], NpyData::I64(vec![1, 2, 3, 4, 5, -6]));
        assert!(String::from_utf8_lossy(&b).contains("'descr': '<i8'"));
        assert!(String::from_utf8_lossy(&b).contains("'shape': (2, 3), }"));
        let b = roundtrip(&[2, 1, 2], NpyData::F32(vec![1.0, 2.0, 3.0, 4.0]));
        assert!(String::from_utf8_lossy(&b).contains("'<f4'"));
        let b = roundtrip(&[4], NpyData::Bool(vec![true, false, false, true]));
        assert!(String::from_utf8_lossy(&b).contains("'|b1'"));
        assert_eq!(&b[b.len() - 4..], &[1, 0, 0, 1]);
        roundtrip(&[0, 5], NpyData::F64(vec![]));
        roundtrip(&[2], NpyData::I32(vec![7, -7]));
        roundtrip(&[3], NpyData::U8(vec![0, 200, 255]));
        roundtrip(&[2], NpyData::U16(vec![65_535, 1]));
        roundtrip(&[2], NpyData::U32(vec![u32::MAX, 7]));
        roundtrip(&[1, 2], NpyData::U64(vec![u64::MAX, 1 << 63]));
    }

    #[test]
    fn complex_files_hold_pairs() {
        let b = roundtrip(&[2], NpyData::C128(vec![[1.0, -2.0], [0.5, 3.0]]));
        assert!(String::from_utf8_lossy(&b).contains("'descr': '<c16'"));
        let body = &b[b.len() - 32..];
        assert_eq!(&body[..8], &1.0f64.to_le_bytes());
        assert_eq!(&body[8..16], &(-2.0f64).to_le_bytes());
        assert_eq!(&body[16..24], &0.5f64.to_le_bytes());
        let b = roundtrip(&[1, 1], NpyData::C64(vec![[0.25, -0.5]]));
        assert!(String::from_utf8_lossy(&b).contains("'descr': '<c8'"));
        assert_eq!(&b[b.len() - 4..], &(-0.5f32).to_le_bytes());
    }

    #[test]
    fn long_shapes_pad_to_the_next_block() {
        let shape = [
            1u64, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        ];
        roundtrip(&shape, NpyData::F64(vec![9.0]));
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(Npy::new(&[2, 2], NpyData::F64(vec![1.0])).is_err());
        assert!(Npy::from_bytes(b"hello").is_err());
        let good = Npy::new(&[2], NpyData::F64(vec![1.0, 2.0]))
            .and_then(|n| n.to_bytes())
            .expect("encodes");
        assert!(Npy::from_bytes(&good[..good.len() - 1]).is_err());
        let mut fortran = good.clone();
        let at = fortran
            .windows(5)
            .position(|w| w == b"False")
            .expect("header has fortran_order");
        fortran[at..at + 5].copy_from_slice(b"True ");
        assert!(Npy::from_bytes(&fortran).is_err());
    }
}
