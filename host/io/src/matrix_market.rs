//! Reading and writing Matrix Market (`.mtx`) coordinate files.
//!
//! This runs in the host, outside the plugin sandbox: applications load a file into COO triplets
//! ([`Coo`]) that the sparse plugin then turns into a CSR matrix.
//!
//! Supported: `%%MatrixMarket matrix coordinate <field> <symmetry>` with field `real`, `integer`
//! or `pattern` (every pattern value is `1.0`) and symmetry `general`, `symmetric` or
//! `skew-symmetric` (`pattern` with `skew-symmetric` is not a valid combination in the format).
//! Header keywords are case-insensitive. Lines starting with `%` are comments and blank lines are
//! skipped anywhere after the banner; `\n` and `\r\n` line endings are both accepted. The size line
//! is `rows cols nnz`, and each entry is a 1-based `i j [value]`.
//!
//! Everything else (the `array` format, the `complex` field, `hermitian` symmetry, malformed or
//! out-of-range lines, a wrong entry count, an entry above the diagonal of a symmetric file, ...)
//! is rejected with [`Error::MatrixMarket`], which names the source and the 1-based line.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use crate::{Error, Result};

/// A sparse matrix as coordinate triplets (0-based), in file order; symmetric files are expanded
/// (each off-diagonal entry also appears mirrored, right after it).
///
/// `row`, `col` and `val` have the same length, one element per stored entry. Its [`Display`]
/// implementation writes the matrix as a `real general` Matrix Market file (see [`to_string`]).
///
/// [`Display`]: fmt::Display
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coo {
    /// Number of rows.
    pub rows: u64,
    /// Number of columns.
    pub cols: u64,
    /// 0-based row index of each entry.
    pub row: Vec<u64>,
    /// 0-based column index of each entry.
    pub col: Vec<u64>,
    /// Value of each entry.
    pub val: Vec<f64>,
}

impl Coo {
    /// The number of stored entries (after symmetric expansion).
    pub fn nnz(&self) -> usize {
        self.row.len()
    }

    /// Checks that `row`, `col` and `val` have the same length and that every index is inside
    /// `rows` x `cols`, so that the matrix can be written and read back.
    pub fn validate(&self) -> Result<()> {
        if self.row.len() != self.col.len() || self.row.len() != self.val.len() {
            return Err(Error::Invalid(format!(
                "COO matrix has {} row indices, {} column indices and {} values; they must match",
                self.row.len(),
                self.col.len(),
                self.val.len()
            )));
        }
        for (k, (&i, &j)) in self.row.iter().zip(&self.col).enumerate() {
            if i >= self.rows || j >= self.cols {
                return Err(Error::Invalid(format!(
                    "COO entry {k} at ({i}, {j}) (0-based) is outside the {} x {} matrix",
                    self.rows, self.cols
                )));
            }
        }
        Ok(())
    }
}

/// Writes the matrix as `real general` Matrix Market text. Values use `{:?}` formatting, which
/// round-trips every `f64` exactly. If the three vectors differ in length, only as many entries as
/// the shortest one holds are written (and counted on the size line).
impl fmt::Display for Coo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nnz = self.row.len().min(self.col.len()).min(self.val.len());
        writeln!(f, "%%MatrixMarket matrix coordinate real general")?;
        writeln!(f, "{} {} {}", self.rows, self.cols, nnz)?;
        for ((&i, &j), &v) in self.row.iter().zip(&self.col).zip(&self.val) {
            writeln!(f, "{} {} {:?}", i.saturating_add(1), j.saturating_add(1), v)?;
        }
        Ok(())
    }
}

/// The value type declared in the banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `real`: each entry carries a floating-point value.
    Real,
    /// `integer`: each entry carries an integer value (converted to `f64`).
    Integer,
    /// `pattern`: entries carry no value; each is `1.0`.
    Pattern,
}

/// The symmetry declared in the banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symmetry {
    /// Every entry is stored.
    General,
    /// Only the lower triangle is stored; `a[j][i] = a[i][j]`.
    Symmetric,
    /// Only the strictly lower triangle is stored; `a[j][i] = -a[i][j]`.
    SkewSymmetric,
}

/// What kind of file it was, from its banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The value type.
    pub field: Field,
    /// The symmetry.
    pub symmetry: Symmetry,
}

impl Header {
    /// True for symmetric and skew-symmetric files (whose entries were expanded on reading).
    pub fn symmetric(&self) -> bool {
        self.symmetry != Symmetry::General
    }
}

/// Parses Matrix Market text held in a string. Errors name the source as `<string>`.
pub fn parse(text: &str) -> Result<Coo> {
    read_from(text.as_bytes(), "<string>").map(|(_, coo)| coo)
}

/// Reads a Matrix Market file, streaming it line by line.
pub fn read(path: &Path) -> Result<Coo> {
    read_with_header(path).map(|(_, coo)| coo)
}

/// Like [`read`], but also returns what kind of file it was.
pub fn read_with_header(path: &Path) -> Result<(Header, Coo)> {
    let file = File::open(path).map_err(|source| Error::Io {
        context: format!("opening Matrix Market file {}", path.display()),
        source,
    })?;
    read_from(BufReader::new(file), &path.display().to_string())
}

/// Reads Matrix Market text from any buffered reader, one line at a time. `source_name` names the
/// input in error messages (for example the file's path). Returns the banner's kind and the
/// triplets.
pub fn read_from(reader: impl BufRead, source_name: &str) -> Result<(Header, Coo)> {
    Parser {
        reader,
        source_name,
        buf: String::new(),
        line: 0,
    }
    .run()
}

/// Writes `coo` to `path` as a `real general` Matrix Market file (see [`to_string`]). Fails with
/// [`Error::Invalid`] if the triplets are inconsistent (see [`Coo::validate`]).
pub fn write(path: &Path, coo: &Coo) -> Result<()> {
    coo.validate()?;
    let io_err = |source| Error::Io {
        context: format!("writing Matrix Market file {}", path.display()),
        source,
    };
    let file = File::create(path).map_err(io_err)?;
    write_to(BufWriter::new(file), coo).map_err(io_err)
}

/// Writes `coo` as `real general` Matrix Market text to any writer, then flushes it. Does not
/// validate the triplets (see [`Coo::validate`]).
pub fn write_to(mut writer: impl Write, coo: &Coo) -> io::Result<()> {
    write!(writer, "{coo}")?;
    writer.flush()
}

/// Formats `coo` as `real general` Matrix Market text: the banner, the size line and one
/// `i j value` line per entry (1-based), values formatted with `{:?}` so that every `f64`
/// round-trips exactly.
pub fn to_string(coo: &Coo) -> String {
    coo.to_string()
}

/// Upper bound on the capacity reserved up front from a file's size line, so that a huge claimed
/// entry count cannot allocate before the entries are actually there.
const MAX_RESERVE: u64 = 1 << 20;

struct Parser<'a, R> {
    reader: R,
    source_name: &'a str,
    /// The current line, without its line ending; reused between lines.
    buf: String,
    /// 1-based number of the line in `buf`; 0 before the first.
    line: usize,
}

/// Up to the first three whitespace-separated fields of a line, and how many fields it has.
struct Fields<'a> {
    count: usize,
    first: [&'a str; 3],
}

impl<'a> Fields<'a> {
    fn of(text: &'a str) -> Self {
        let mut fields = Fields {
            count: 0,
            first: [""; 3],
        };
        for (k, token) in text.split_whitespace().enumerate() {
            if let Some(slot) = fields.first.get_mut(k) {
                *slot = token;
            }
            fields.count += 1;
        }
        fields
    }
}

impl<R: BufRead> Parser<'_, R> {
    fn error(&self, line: usize, message: impl Into<String>) -> Error {
        Error::MatrixMarket {
            source_name: self.source_name.to_string(),
            line,
            message: message.into(),
        }
    }

    /// Reads the next line into `buf`, without its line ending. False at the end of the input.
    fn next_line(&mut self) -> Result<bool> {
        self.buf.clear();
        match self.reader.read_line(&mut self.buf) {
            Ok(0) => Ok(false),
            Ok(_) => {
                self.line += 1;
                let len = self.buf.trim_end_matches(['\n', '\r']).len();
                self.buf.truncate(len);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                Err(self.error(self.line + 1, "line is not valid UTF-8"))
            }
            Err(source) => Err(Error::Io {
                context: format!(
                    "reading Matrix Market {} after line {}",
                    self.source_name, self.line
                ),
                source,
            }),
        }
    }

    /// Reads lines into `buf` until one is neither blank nor a comment. False at the end of the
    /// input.
    fn next_data_line(&mut self) -> Result<bool> {
        while self.next_line()? {
            let text = self.buf.trim_start();
            if !text.is_empty() && !text.starts_with('%') {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn run(mut self) -> Result<(Header, Coo)> {
        let header = self.banner()?;

        if !self.next_data_line()? {
            return Err(self.error(self.line.max(1), "missing size line `rows cols nnz`"));
        }
        let size_line = self.line;
        let size = Fields::of(&self.buf);
        if size.count != 3 {
            return Err(self.error(
                size_line,
                format!(
                    "size line must be `rows cols nnz`, found {} fields",
                    size.count
                ),
            ));
        }
        let [rows, cols, nnz] = size.first;
        let rows = parse_count(rows, "row count").map_err(|m| self.error(size_line, m))?;
        let cols = parse_count(cols, "column count").map_err(|m| self.error(size_line, m))?;
        let nnz = parse_count(nnz, "entry count").map_err(|m| self.error(size_line, m))?;
        if header.symmetric() && rows != cols {
            return Err(self.error(
                size_line,
                format!("a {rows} x {cols} matrix is not square, so it cannot be symmetric"),
            ));
        }

        let mirrored = header.symmetric();
        let reserve =
            usize::try_from(nnz.min(MAX_RESERVE)).unwrap_or(0) * if mirrored { 2 } else { 1 };
        let mut coo = Coo {
            rows,
            cols,
            row: Vec::with_capacity(reserve),
            col: Vec::with_capacity(reserve),
            val: Vec::with_capacity(reserve),
        };

        let want_fields = if header.field == Field::Pattern { 2 } else { 3 };
        let mut seen: u64 = 0;
        while self.next_data_line()? {
            let line = self.line;
            let fields = Fields::of(&self.buf);
            if seen == nnz {
                return Err(self.error(
                    line,
                    format!("more entries than the {nnz} the size line (line {size_line}) says"),
                ));
            }
            if fields.count != want_fields {
                let form = if want_fields == 2 {
                    "`i j`"
                } else {
                    "`i j value`"
                };
                return Err(self.error(
                    line,
                    format!(
                        "entry must be {form} for a {} file, found {} fields",
                        field_name(header.field),
                        fields.count
                    ),
                ));
            }
            let [i, j, value] = fields.first;
            let i = parse_index(i, "row", rows).map_err(|m| self.error(line, m))?;
            let j = parse_index(j, "column", cols).map_err(|m| self.error(line, m))?;
            let v = match header.field {
                Field::Pattern => 1.0,
                Field::Real => value
                    .parse::<f64>()
                    .map_err(|_| self.error(line, format!("bad real value `{value}`")))?,
                Field::Integer => value
                    .parse::<i64>()
                    .map_err(|_| self.error(line, format!("bad integer value `{value}`")))?
                    as f64,
            };
            match header.symmetry {
                Symmetry::General => {}
                Symmetry::Symmetric if i < j => {
                    return Err(self.error(
                        line,
                        format!(
                            "entry ({}, {}) is above the diagonal; symmetric files store only \
                             the lower triangle",
                            i + 1,
                            j + 1
                        ),
                    ));
                }
                Symmetry::SkewSymmetric if i < j => {
                    return Err(self.error(
                        line,
                        format!(
                            "entry ({}, {}) is above the diagonal; skew-symmetric files store \
                             only the strictly lower triangle",
                            i + 1,
                            j + 1
                        ),
                    ));
                }
                Symmetry::SkewSymmetric if i == j && v != 0.0 => {
                    return Err(self.error(
                        line,
                        format!(
                            "diagonal entry ({}, {}) is {v:?}; a skew-symmetric matrix has a \
                             zero diagonal",
                            i + 1,
                            j + 1
                        ),
                    ));
                }
                Symmetry::Symmetric | Symmetry::SkewSymmetric => {}
            }
            coo.row.push(i);
            coo.col.push(j);
            coo.val.push(v);
            if mirrored && i != j {
                coo.row.push(j);
                coo.col.push(i);
                coo.val.push(if header.symmetry == Symmetry::SkewSymmetric {
                    -v
                } else {
                    v
                });
            }
            seen += 1;
        }
        if seen != nnz {
            return Err(self.error(
                self.line,
                format!(
                    "file ends after {seen} entries, but the size line (line {size_line}) says \
                     {nnz}"
                ),
            ));
        }
        Ok((header, coo))
    }

    /// Reads and checks the banner on line 1.
    fn banner(&mut self) -> Result<Header> {
        if !self.next_line()? {
            return Err(self.error(1, "empty input: missing `%%MatrixMarket` banner"));
        }
        let lower = self.buf.trim().to_ascii_lowercase();
        let tokens: Vec<&str> = lower.split_whitespace().collect();
        if tokens.first() != Some(&"%%matrixmarket") {
            return Err(self.error(
                1,
                "missing `%%MatrixMarket` banner (the first line must be \
                 `%%MatrixMarket matrix coordinate <field> <symmetry>`)",
            ));
        }
        if tokens.len() != 5 {
            return Err(self.error(
                1,
                format!(
                    "banner must be `%%MatrixMarket matrix coordinate <field> <symmetry>`, \
                     found {} words",
                    tokens.len()
                ),
            ));
        }
        if tokens[1] != "matrix" {
            return Err(self.error(
                1,
                format!("unsupported object `{}` (only `matrix`)", tokens[1]),
            ));
        }
        match tokens[2] {
            "coordinate" => {}
            "array" => {
                return Err(self.error(
                    1,
                    "`array` (dense) format is not supported, only `coordinate`",
                ));
            }
            other => {
                return Err(self.error(1, format!("unknown format `{other}`")));
            }
        }
        let field = match tokens[3] {
            "real" => Field::Real,
            "integer" => Field::Integer,
            "pattern" => Field::Pattern,
            "complex" => {
                return Err(self.error(1, "`complex` field is not supported"));
            }
            other => {
                return Err(self.error(1, format!("unknown field `{other}`")));
            }
        };
        let symmetry = match tokens[4] {
            "general" => Symmetry::General,
            "symmetric" => Symmetry::Symmetric,
            "skew-symmetric" => Symmetry::SkewSymmetric,
            "hermitian" => {
                return Err(self.error(1, "`hermitian` symmetry is not supported"));
            }
            other => {
                return Err(self.error(1, format!("unknown symmetry `{other}`")));
            }
        };
        if field == Field::Pattern && symmetry == Symmetry::SkewSymmetric {
            return Err(self.error(
                1,
                "`pattern` cannot be `skew-symmetric` (pattern values are all 1)",
            ));
        }
        Ok(Header { field, symmetry })
    }
}

fn field_name(field: Field) -> &'static str {
    match field {
        Field::Real => "real",
        Field::Integer => "integer",
        Field::Pattern => "pattern",
    }
}

fn parse_count(token: &str, what: &str) -> std::result::Result<u64, String> {
    token
        .parse::<u64>()
        .map_err(|_| format!("bad {what} `{token}` on the size line"))
}

/// Parses a 1-based index no greater than `bound` into a 0-based one.
fn parse_index(token: &str, what: &str, bound: u64) -> std::result::Result<u64, String> {
    let index = token
        .parse::<u64>()
        .map_err(|_| format!("bad {what} index `{token}`"))?;
    if index == 0 {
        return Err(format!("{what} index 0: indices are 1-based"));
    }
    if index > bound {
        return Err(format!(
            "{what} index {index} is out of range (the matrix has {bound} {what}s)"
        ));
    }
    Ok(index - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The error's line and message, or a panic if `text` parses.
    fn err(text: &str) -> (usize, String) {
        match parse(text) {
            Err(Error::MatrixMarket {
                source_name,
                line,
                message,
            }) => {
                assert_eq!(source_name, "<string>");
                (line, message)
            }
            Err(e) => panic!("wrong error kind: {e}"),
            Ok(coo) => panic!("parsed, but should have failed: {coo:?}"),
        }
    }

    /// Asserts that `text` fails at `line` with a message containing `what`.
    fn rejects(text: &str, line: usize, what: &str) {
        let (l, message) = err(text);
        assert_eq!(l, line, "wrong line for {what:?}: {message}");
        assert!(
            message.contains(what),
            "message {message:?} does not contain {what:?}"
        );
        // The displayed error carries the line too.
        let shown = parse(text).unwrap_err().to_string();
        assert!(shown.contains(&format!("line {line}:")), "{shown}");
    }

    fn sample() -> Coo {
        Coo {
            rows: 3,
            cols: 4,
            row: vec![0, 2, 1, 2, 0],
            col: vec![0, 3, 1, 0, 2],
            val: vec![0.1, 1e-300, -3.5e12, f64::MIN_POSITIVE, -0.0],
        }
    }

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("weft-mm-{}-{name}.mtx", std::process::id()))
    }

    #[test]
    fn round_trip_through_a_file() {
        let coo = sample();
        let path = temp_path("round-trip");
        write(&path, &coo).unwrap();
        let back = read(&path).unwrap();
        let (header, again) = read_with_header(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, coo);
        assert_eq!(again, coo);
        assert_eq!(
            header,
            Header {
                field: Field::Real,
                symmetry: Symmetry::General
            }
        );
        for (a, b) in back.val.iter().zip(&coo.val) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn round_trip_through_a_string() {
        let coo = sample();
        let text = to_string(&coo);
        assert!(text.starts_with("%%MatrixMarket matrix coordinate real general\n3 4 5\n"));
        assert!(text.contains("1 1 0.1\n"), "{text}");
        assert!(text.contains("3 4 1e-300\n"), "{text}");
        assert_eq!(parse(&text).unwrap(), coo);
        let mut bytes = Vec::new();
        write_to(&mut bytes, &coo).unwrap();
        assert_eq!(bytes, text.as_bytes());
    }

    #[test]
    fn empty_matrix_round_trips() {
        let coo = Coo {
            rows: 0,
            cols: 0,
            ..Coo::default()
        };
        assert_eq!(parse(&to_string(&coo)).unwrap(), coo);
    }

    #[test]
    fn write_rejects_inconsistent_triplets() {
        let path = temp_path("bad");
        let mut coo = sample();
        coo.val.pop();
        assert!(matches!(write(&path, &coo), Err(Error::Invalid(_))));
        let mut coo = sample();
        coo.col[1] = 4;
        assert!(matches!(write(&path, &coo), Err(Error::Invalid(_))));
        assert!(!path.exists());
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = read(&temp_path("does-not-exist")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    #[test]
    fn symmetric_entries_are_mirrored_right_after() {
        let text = "%%MatrixMarket matrix coordinate real symmetric\n\
                    3 3 3\n\
                    1 1 2.0\n\
                    3 1 -1.5\n\
                    3 2 4\n";
        let coo = parse(text).unwrap();
        assert_eq!(coo.rows, 3);
        assert_eq!(coo.cols, 3);
        assert_eq!(coo.row, vec![0, 2, 0, 2, 1]);
        assert_eq!(coo.col, vec![0, 0, 2, 1, 2]);
        assert_eq!(coo.val, vec![2.0, -1.5, -1.5, 4.0, 4.0]);
        assert_eq!(coo.nnz(), 5);
    }

    #[test]
    fn skew_symmetric_mirror_is_negated() {
        let text = "%%MatrixMarket matrix coordinate integer skew-symmetric\n\
                    2 2 1\n\
                    2 1 7\n";
        let coo = parse(text).unwrap();
        assert_eq!(coo.row, vec![1, 0]);
        assert_eq!(coo.col, vec![0, 1]);
        assert_eq!(coo.val, vec![7.0, -7.0]);
        let (header, _) = read_from(text.as_bytes(), "x").unwrap();
        assert!(header.symmetric());
        assert_eq!(header.symmetry, Symmetry::SkewSymmetric);
    }

    #[test]
    fn pattern_values_are_one() {
        let text = "%%MatrixMarket matrix coordinate pattern general\n\
                    2 3 2\n\
                    1 3\n\
                    2 1\n";
        let coo = parse(text).unwrap();
        assert_eq!(coo.row, vec![0, 1]);
        assert_eq!(coo.col, vec![2, 0]);
        assert_eq!(coo.val, vec![1.0, 1.0]);
        let sym =
            parse("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n1 1\n2 1\n").unwrap();
        assert_eq!(sym.val, vec![1.0, 1.0, 1.0]);
        assert_eq!(sym.row, vec![0, 1, 0]);
    }

    #[test]
    fn integer_values() {
        let coo =
            parse("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 -42\n").unwrap();
        assert_eq!(coo.val, vec![-42.0]);
    }

    #[test]
    fn keywords_are_case_insensitive() {
        let coo = parse("%%matrixmarket MATRIX Coordinate REAL Symmetric\n1 1 1\n1 1 3\n").unwrap();
        assert_eq!(coo.val, vec![3.0]);
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "%%MatrixMarket matrix coordinate real general\n\
                    % a comment\n\
                    \n\
                    %another\n   \n\
                    2 2 2\n\
                    % between entries\n\
                    \n\
                    1 2 0.5\n\
                    \t\n\
                    2 2 1.5\n\
                    \n\
                    % trailing\n";
        let coo = parse(text).unwrap();
        assert_eq!(coo.row, vec![0, 1]);
        assert_eq!(coo.col, vec![1, 1]);
        assert_eq!(coo.val, vec![0.5, 1.5]);
    }

    #[test]
    fn crlf_line_endings() {
        let text = "%%MatrixMarket matrix coordinate real general\r\n\
                    % comment\r\n\
                    \r\n\
                    2 2 2\r\n\
                    1 1 1.25\r\n\
                    2 1 -2\r\n";
        let coo = parse(text).unwrap();
        assert_eq!(coo.row, vec![0, 1]);
        assert_eq!(coo.col, vec![0, 0]);
        assert_eq!(coo.val, vec![1.25, -2.0]);
        // An error in a CRLF file still counts lines correctly.
        rejects(
            "%%MatrixMarket matrix coordinate real general\r\n\r\n2 2 1\r\n1 x 1\r\n",
            4,
            "bad column index `x`",
        );
    }

    #[test]
    fn no_final_newline() {
        let coo = parse("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 9").unwrap();
        assert_eq!(coo.val, vec![9.0]);
    }

    #[test]
    fn rejects_missing_or_garbled_banner() {
        rejects("", 1, "missing `%%MatrixMarket` banner");
        rejects("1 1 1\n1 1 1\n", 1, "missing `%%MatrixMarket` banner");
        rejects(
            "% comment\n%%MatrixMarket matrix coordinate real general\n1 1 0\n",
            1,
            "missing `%%MatrixMarket` banner",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real\n1 1 0\n",
            1,
            "found 4 words",
        );
        rejects(
            "%%MatrixMarket vector coordinate real general\n",
            1,
            "object `vector`",
        );
        rejects(
            "%%MatrixMarket matrix sparse real general\n",
            1,
            "unknown format",
        );
        rejects(
            "%%MatrixMarket matrix coordinate float general\n",
            1,
            "unknown field",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real lower\n",
            1,
            "unknown symmetry",
        );
    }

    #[test]
    fn rejects_array_format() {
        rejects(
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
            1,
            "`array`",
        );
    }

    #[test]
    fn rejects_complex_field() {
        rejects(
            "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
            1,
            "`complex`",
        );
    }

    #[test]
    fn rejects_hermitian_symmetry() {
        rejects(
            "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n",
            1,
            "`hermitian`",
        );
    }

    #[test]
    fn rejects_pattern_skew_symmetric() {
        rejects(
            "%%MatrixMarket matrix coordinate pattern skew-symmetric\n2 2 1\n2 1\n",
            1,
            "skew-symmetric",
        );
    }

    #[test]
    fn rejects_malformed_size_line() {
        let banner = "%%MatrixMarket matrix coordinate real general\n% c\n";
        rejects(&format!("{banner}2 2\n"), 3, "found 2 fields");
        rejects(&format!("{banner}2 2 1 1\n"), 3, "found 4 fields");
        rejects(
            &format!("{banner}2 x 1\n1 1 1\n"),
            3,
            "bad column count `x`",
        );
        rejects(&format!("{banner}-2 2 1\n"), 3, "bad row count `-2`");
        rejects(&format!("{banner}2 2 1.5\n"), 3, "bad entry count `1.5`");
        rejects(
            &format!("{banner}\n% only comments\n"),
            4,
            "missing size line",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real general",
            1,
            "missing size line",
        );
    }

    #[test]
    fn rejects_malformed_entries() {
        let head = "%%MatrixMarket matrix coordinate real general\n3 3 2\n";
        rejects(&format!("{head}1 1 1\n2 2\n"), 4, "found 2 fields");
        rejects(&format!("{head}1 1 1 1\n"), 3, "found 4 fields");
        rejects(&format!("{head}1 1 abc\n"), 3, "bad real value `abc`");
        rejects(&format!("{head}1.0 1 1\n"), 3, "bad row index `1.0`");
        rejects(&format!("{head}1 -1 1\n"), 3, "bad column index `-1`");
        let int = "%%MatrixMarket matrix coordinate integer general\n3 3 1\n";
        rejects(&format!("{int}1 1 2.5\n"), 3, "bad integer value `2.5`");
        let pat = "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n";
        rejects(&format!("{pat}1 1 1\n"), 3, "found 3 fields");
        rejects(&format!("{pat}1\n"), 3, "found 1 fields");
    }

    #[test]
    fn rejects_bad_indices() {
        let head = "%%MatrixMarket matrix coordinate real general\n2 3 2\n";
        rejects(&format!("{head}1 1 1\n0 1 1\n"), 4, "row index 0");
        rejects(&format!("{head}1 0 1\n"), 3, "column index 0");
        rejects(&format!("{head}3 1 1\n"), 3, "row index 3 is out of range");
        rejects(
            &format!("{head}2 4 1\n"),
            3,
            "column index 4 is out of range",
        );
        // The largest valid indices are fine.
        assert!(parse(&format!("{head}2 3 1\n1 1 1\n")).is_ok());
    }

    #[test]
    fn rejects_too_many_entries() {
        rejects(
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n\n2 2 2\n",
            5,
            "more entries than the 1",
        );
    }

    #[test]
    fn rejects_too_few_entries() {
        rejects(
            "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 2\n",
            4,
            "file ends after 2 entries",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n% nothing\n",
            3,
            "file ends after 0 entries",
        );
    }

    #[test]
    fn rejects_non_square_symmetric() {
        rejects(
            "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
            2,
            "not square",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real skew-symmetric\n% c\n3 2 0\n",
            3,
            "not square",
        );
    }

    #[test]
    fn rejects_upper_triangle_in_symmetric() {
        rejects(
            "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 3 1\n",
            4,
            "entry (1, 3) is above the diagonal",
        );
        rejects(
            "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 3 1\n",
            3,
            "above the diagonal",
        );
    }

    #[test]
    fn rejects_nonzero_skew_symmetric_diagonal() {
        rejects(
            "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 2 1\n",
            3,
            "zero diagonal",
        );
        assert!(
            parse("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 2 0\n").is_ok()
        );
    }

    #[test]
    fn rejects_invalid_utf8_with_line() {
        let mut bytes = b"%%MatrixMarket matrix coordinate real general\n1 1 1\n".to_vec();
        bytes.extend_from_slice(b"1 1 \xff\n");
        match read_from(bytes.as_slice(), "bytes") {
            Err(Error::MatrixMarket { line, message, .. }) => {
                assert_eq!(line, 3);
                assert!(message.contains("UTF-8"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn huge_claimed_nnz_does_not_preallocate() {
        rejects(
            "%%MatrixMarket matrix coordinate real symmetric\n\
             18446744073709551615 18446744073709551615 18446744073709551615\n1 1 1\n",
            3,
            "file ends after 1 entries",
        );
    }

    #[test]
    fn file_errors_name_the_path() {
        let path = temp_path("names");
        std::fs::write(
            &path,
            "%%MatrixMarket matrix coordinate real general\n1 1 1\n",
        )
        .unwrap();
        let e = read(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("line 2:"), "{e}");
    }

    fn coo_strategy() -> impl Strategy<Value = Coo> {
        (1u64..20, 1u64..20).prop_flat_map(|(rows, cols)| {
            let finite = prop_oneof![
                prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
                (-1000i32..1000).prop_map(f64::from),
            ];
            prop::collection::vec((0..rows, 0..cols, finite), 0..40).prop_map(move |entries| {
                let mut coo = Coo {
                    rows,
                    cols,
                    ..Coo::default()
                };
                for (i, j, v) in entries {
                    coo.row.push(i);
                    coo.col.push(j);
                    coo.val.push(v);
                }
                coo
            })
        })
    }

    proptest! {
        #[test]
        fn proptest_round_trip(coo in coo_strategy()) {
            let back = parse(&to_string(&coo)).unwrap();
            prop_assert_eq!(back.rows, coo.rows);
            prop_assert_eq!(back.cols, coo.cols);
            prop_assert_eq!(&back.row, &coo.row);
            prop_assert_eq!(&back.col, &coo.col);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&back.val), bits(&coo.val));
        }
    }
}
