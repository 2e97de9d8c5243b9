//! Kernel keys: how a task names its kernel, and how `kernel-body` reads the name back.
//!
//! A key encodes everything a kernel body depends on (the operator, the element types, the
//! rank of the iteration space, which operands are tiled arrays, 0-d arrays or scalars) and
//! nothing else. Scalar *values* travel as task scalars, never in keys, so one kernel serves
//! every value and a loop that changes a constant compiles nothing new.
//!
//! A key is a short string of `.`-separated tokens. `<dt>` is a dtype name (`f32`, `f64`,
//! `i32`, `i64`, `bool`, `u8`, `u16`, `u32`, `u64`), `r<k>` the rank of the iteration space, and operand kinds are one
//! letter each: `a` an array of the output's shape (tiled like the output), `z` a 0-d array
//! broadcast to an n-d output (partition none, loaded at `[]`), `s` a scalar parameter.
//!
//! | key | kernel |
//! | --- | --- |
//! | `fill.<dt>.r<k>` | `out[i] = s` |
//! | `copy.<dt>.r<k>.<a\|z>` | `out[i] = src[i]` |
//! | `cast.<from>.<to>.r<k>` | `out[i] = to(src[i])` |
//! | `arange.<dt>` | `out[i] = start + step * g` (`g` the global index) |
//! | `linspace.<dt>` | as `arange`, with the last element exactly `stop` |
//! | `random.<dt>.r<k>` | uniform numbers from a counter-based generator |
//! | `binary.<op>.<dt>.r<k>.<kk>` | `out[i] = a op b`; `<dt>` is the operands' dtype |
//! | `unary.<op>.<dt>.r<k>` | `out[i] = op a[i]` |
//! | `select.<dt>.r<k>.<kkk>` | `out[i] = cond ? a : b`; `<dt>` is the arms' dtype |
//! | `reduce.<op>.<dt>.r<k>` | `out[] op= a[i]` |
//! | `dot.<dt>` | `out[] += a[i] * b[i]` |
//! | `norm.sumsq.<dt>.r<k>` | `out[] += a[i] * a[i]` |
//! | `norm.sqrt.<dt>` | `out[] = sqrt(out[])` |
//! | `reduceaxes.<op>.<dt>.r<k>.m<mask>` | `out[i with masked dims 0] op= a[i]` |
//! | `reducerows.<op>.<dt>.r<k>.q<q>` | `out[i] = op over the q trailing dims of a[i, ...]` |
//! | `treeblocks.<op>.<dt>.r<k>.l<n>` | `out[b, ...]` = the aligned pairwise tree of `a[16b .. 16b+n, ...]` (past the end: the exact identity; `n` is 16, or less where `a` has at most `n` rows) |
//! | `matvec.<dt>` | `y[i] = sum_j A[i,j] * x[j]` (in eight interleaved partial sums) |
//! | `matvec_parts.<dt>` | the same for long rows, each cut into eight parts summed as `matvec`'s rows and combined by the pairwise tree (`weft_ir::matvec`: a grid may split `k`) |
//! | `vecmat.<dt>` | `y[r] += A[r,i] * x[i]`, launched over `i` |
//! | `vecmat_rows.<dt>` | `y[r] += B[i,r] * x[i]` (`B = A.T`, read by rows), launched over `i` |
//! | `matmul.<dt>` | `C[i,j] = sum_p A[i,p] * B[p,j]` (in eight interleaved partial sums) |
//! | `matmul_rows.<dt>` | `C[r,j] += X[i,r] * B[i,j]` (`A = X.T`), launched over the rows `i` of `X` and `B` |
//! | `diag.extract.<dt>` | `out[i] = A[g,g]` |
//! | `diag.embed.<dt>` | `out[i,j] = i == j ? v[i] : 0` (global indices) |
//! | `cumsum.<dt>.r<k>` | `out[i, j] = sum over l <= j of a[i, l]`, launched over the `k` leading dims |
//! | `take.<dt>.<it>.r<k>.d<d>` | `out[i] = a[i with dim d replaced by idx[i_d]]` (negative wraps) |
//!
//! For example `binary.add.f64.r2.as` adds a scalar to a 2-d `f64` array. Decoding accepts
//! exactly the keys that encoding produces: a key must re-encode to itself, use a combination
//! of dtype and operator that the operation accepts, and have a rank the IR allows.

use std::fmt;
use std::str::FromStr;

use weft_sdk::ir::{DType, ReduceOp};

use crate::catalog::{self, BinOp, UnOp};

/// The largest rank a kernel's store may have.
pub const MAX_RANK: u32 = weft_sdk::ir::validate::MAX_RANK;

/// How an operand of an element-wise kernel reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An array of the output's shape, tiled like the output and loaded at the loop index.
    Array,
    /// A 0-d array broadcast to an n-d output: partition none, loaded at `[]`.
    Zero,
    /// A scalar parameter.
    Scalar,
}

impl Kind {
    /// The kind's letter in keys (`a`, `z`, `s`).
    pub fn letter(self) -> char {
        match self {
            Kind::Array => 'a',
            Kind::Zero => 'z',
            Kind::Scalar => 's',
        }
    }

    /// The kind with this letter.
    pub fn from_letter(c: char) -> Option<Kind> {
        match c {
            'a' => Some(Kind::Array),
            'z' => Some(Kind::Zero),
            's' => Some(Kind::Scalar),
            _ => None,
        }
    }
}

/// A kernel key, decoded. See the [module documentation](self) for the text form and
/// [`crate::kernels`] for each kernel's parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// Fill an array with a scalar.
    Fill {
        /// Element type.
        dtype: DType,
        /// Rank of the array.
        rank: u32,
    },
    /// Copy an array (or broadcast a 0-d array) into another of the same dtype.
    Copy {
        /// Element type.
        dtype: DType,
        /// Rank of the destination.
        rank: u32,
        /// The source's kind: [`Kind::Array`] or [`Kind::Zero`].
        src: Kind,
    },
    /// Convert an array to another dtype.
    Cast {
        /// The source's dtype.
        from: DType,
        /// The result's dtype (not `from`: that is a [`Key::Copy`]).
        to: DType,
        /// Rank of the arrays.
        rank: u32,
    },
    /// `start + step * i` over a 1-d array.
    Arange {
        /// Element type.
        dtype: DType,
    },
    /// Evenly spaced values over a 1-d array, ending exactly at `stop`.
    Linspace {
        /// Element type.
        dtype: DType,
    },
    /// Uniform random numbers.
    Random {
        /// Element type (a float).
        dtype: DType,
        /// Rank of the array.
        rank: u32,
    },
    /// An element-wise binary operation.
    Binary {
        /// The operator.
        op: BinOp,
        /// The operands' dtype.
        dtype: DType,
        /// Rank of the output.
        rank: u32,
        /// How each operand reaches the kernel.
        kinds: [Kind; 2],
    },
    /// An element-wise unary operation.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand's dtype.
        dtype: DType,
        /// Rank of the arrays.
        rank: u32,
    },
    /// `cond ? a : b`, element-wise.
    Select {
        /// The arms' dtype.
        dtype: DType,
        /// Rank of the output.
        rank: u32,
        /// How the condition and the two arms reach the kernel.
        kinds: [Kind; 3],
    },
    /// A reduction of an array into a 0-d array.
    Reduce {
        /// The operator.
        op: ReduceOp,
        /// Element type.
        dtype: DType,
        /// Rank of the array reduced.
        rank: u32,
    },
    /// A reduction over the dimensions in `mask` (bit `d` for dimension `d`) into an output of
    /// the input's rank with extent 1 there, launched over the input.
    ReduceAxes {
        /// The operator.
        op: ReduceOp,
        /// The dtype.
        dtype: DType,
        /// The input's rank.
        rank: u32,
        /// The reduced dimensions.
        mask: u32,
    },
    /// A reduction over the `reduced` trailing dimensions of the input, one output element
    /// per point of the `kept` leading ones, launched over the output.
    ReduceRows {
        /// The operator.
        op: ReduceOp,
        /// The dtype.
        dtype: DType,
        /// The output's rank (the input's leading dimensions).
        kept: u32,
        /// The number of reduced trailing dimensions.
        reduced: u32,
    },
    /// One level of 16-leaf subtrees of the canonical reduction order along
    /// dimension 0: each output element is the aligned pairwise tree of `leaves`
    /// consecutive input elements along dimension 0 (those past the end counting as the
    /// operator's exact identity), launched over the output.
    TreeBlocks {
        /// The operator (a float sum or product).
        op: ReduceOp,
        /// The dtype.
        dtype: DType,
        /// The rank of the input and the output.
        rank: u32,
        /// Leaves per subtree: 16, or the power of two at least dimension 0's extent where
        /// that is smaller (the same bits: the leaves past it are exact identities).
        leaves: u32,
    },
    /// The running sum along the last dimension, one sequential loop per point of the `kept`
    /// leading dimensions (the launch's).
    Cumsum {
        /// The dtype.
        dtype: DType,
        /// The rank of the launch (the input's rank minus one).
        kept: u32,
    },
    /// The first position of the least (`min`) or greatest (`max`) element along the last
    /// dimension, as `i64` (the first NaN where there is one), one sequential scan per point
    /// of the `kept` leading dimensions (the launch's, the output's).
    ArgRows {
        /// The operator: `min` or `max`.
        op: ReduceOp,
        /// The input's dtype.
        dtype: DType,
        /// The output's rank (the input's rank minus one).
        kept: u32,
    },
    /// `a` gathered along dimension `axis` at the positions of a 1-d integer array, launched
    /// over the output (of `a`'s rank).
    Take {
        /// The element type.
        dtype: DType,
        /// The positions' type (`i32` or `i64`).
        index: DType,
        /// The rank of `a` and of the output.
        rank: u32,
        /// The gathered dimension.
        axis: u32,
    },
    /// The positions of the true elements of a flattened bool mask, written in order by one
    /// point that walks the mask's chunks that hold any (see `kernels::flat_nonzero`).
    FlatNonzero,
    /// The number of true elements of each chunk of a flattened bool mask (see
    /// `kernels::chunk_counts`), one point per tile of chunks.
    ChunkCounts,
    /// One pass of a stable merge sort along dimension 1 (see `kernels::merge_pass`): sorted
    /// runs of a width are merged pairwise, each point merging one chunk of the output.
    MergePass {
        /// The keys' dtype.
        dtype: DType,
        /// Whether the keys' positions travel with them (`argsort`).
        indices: bool,
    },
    /// `out[p[j]] = v[j]` (or `+=`) for each `j` in order, walked by one point (see
    /// `kernels::scatter`).
    Scatter {
        /// The target's dtype.
        dtype: DType,
        /// Whether the values are added.
        accumulate: bool,
    },
    /// `A @ x` launched over `x` (a wide `A`, such as a transpose): each point reduces its
    /// columns' contributions into the whole `y`.
    Vecmat {
        /// The dtype.
        dtype: DType,
    },
    /// `A @ x` launched over `x` for a wide `A` whose transpose `B` is stored by rows (the
    /// transpose of a tall matrix): each point reduces `B[i, :] * x[i]` into the whole `y`,
    /// reading its row of `B` contiguously.
    VecmatRows {
        /// The dtype.
        dtype: DType,
    },
    /// The dot product of two vectors, reduced into a 0-d array.
    Dot {
        /// Element type (a float).
        dtype: DType,
    },
    /// The dot product of two short vectors (at most `SMALL_DOT` elements) on one point: a
    /// fold in the lane order (`fold_lanes`), written into a 0-d array.
    DotFold {
        /// Element type (a float).
        dtype: DType,
    },
    /// The sum of squares of an array, reduced into a 0-d array (the first step of `norm`).
    SumSquares {
        /// Element type (a float).
        dtype: DType,
        /// Rank of the array.
        rank: u32,
    },
    /// The square root of a 0-d array, in place (the last step of `norm`).
    SqrtInPlace {
        /// Element type (a float).
        dtype: DType,
    },
    /// A matrix-vector product.
    Matvec {
        /// Element type (a float).
        dtype: DType,
    },
    /// A matrix-vector product of long rows, by parts (`weft_ir::matvec::matvec_parts`).
    MatvecParts {
        /// Element type (a float).
        dtype: DType,
    },
    /// A matrix-matrix product.
    Matmul {
        /// Element type (a float).
        dtype: DType,
    },
    /// `X.T @ B` launched over the rows of `X` and `B` (the product of a transposed tall
    /// matrix, the inner dimension long): each point reduces the outer product of its rows
    /// into the whole `C`.
    MatmulRows {
        /// Element type (a float).
        dtype: DType,
    },
    /// The diagonal of a matrix.
    DiagExtract {
        /// Element type.
        dtype: DType,
    },
    /// A square matrix with a vector on its diagonal.
    DiagEmbed {
        /// Element type.
        dtype: DType,
    },
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Fill { dtype, rank } => write!(f, "fill.{dtype}.r{rank}"),
            Key::Copy { dtype, rank, src } => write!(f, "copy.{dtype}.r{rank}.{}", src.letter()),
            Key::Cast { from, to, rank } => write!(f, "cast.{from}.{to}.r{rank}"),
            Key::Arange { dtype } => write!(f, "arange.{dtype}"),
            Key::Linspace { dtype } => write!(f, "linspace.{dtype}"),
            Key::Random { dtype, rank } => write!(f, "random.{dtype}.r{rank}"),
            Key::Binary {
                op,
                dtype,
                rank,
                kinds,
            } => write!(f, "binary.{}.{dtype}.r{rank}.{}", op.name(), letters(kinds)),
            Key::Unary { op, dtype, rank } => write!(f, "unary.{}.{dtype}.r{rank}", op.name()),
            Key::Select { dtype, rank, kinds } => {
                write!(f, "select.{dtype}.r{rank}.{}", letters(kinds))
            }
            Key::Reduce { op, dtype, rank } => write!(f, "reduce.{}.{dtype}.r{rank}", op.name()),
            Key::Dot { dtype } => write!(f, "dot.{dtype}"),
            Key::DotFold { dtype } => write!(f, "dotfold.{dtype}"),
            Key::SumSquares { dtype, rank } => write!(f, "norm.sumsq.{dtype}.r{rank}"),
            Key::SqrtInPlace { dtype } => write!(f, "norm.sqrt.{dtype}"),
            Key::ReduceAxes {
                op,
                dtype,
                rank,
                mask,
            } => write!(f, "reduceaxes.{}.{dtype}.r{rank}.m{mask}", op.name()),
            Key::ReduceRows {
                op,
                dtype,
                kept,
                reduced,
            } => write!(f, "reducerows.{}.{dtype}.r{kept}.q{reduced}", op.name()),
            Key::TreeBlocks {
                op,
                dtype,
                rank,
                leaves,
            } => write!(f, "treeblocks.{}.{dtype}.r{rank}.l{leaves}", op.name()),
            Key::Matvec { dtype } => write!(f, "matvec.{dtype}"),
            Key::MatvecParts { dtype } => write!(f, "matvec_parts.{dtype}"),
            Key::Vecmat { dtype } => write!(f, "vecmat.{dtype}"),
            Key::VecmatRows { dtype } => write!(f, "vecmat_rows.{dtype}"),
            Key::Matmul { dtype } => write!(f, "matmul.{dtype}"),
            Key::MatmulRows { dtype } => write!(f, "matmul_rows.{dtype}"),
            Key::DiagExtract { dtype } => write!(f, "diag.extract.{dtype}"),
            Key::DiagEmbed { dtype } => write!(f, "diag.embed.{dtype}"),
            Key::Cumsum { dtype, kept } => write!(f, "cumsum.{dtype}.r{kept}"),
            Key::ArgRows { op, dtype, kept } => write!(f, "argrows.{}.{dtype}.r{kept}", op.name()),
            Key::FlatNonzero => write!(f, "flatnonzero"),
            Key::ChunkCounts => write!(f, "chunkcounts"),
            Key::MergePass {
                dtype,
                indices: false,
            } => write!(f, "mergepass.{dtype}"),
            Key::MergePass {
                dtype,
                indices: true,
            } => write!(f, "argmergepass.{dtype}"),
            Key::Scatter {
                dtype,
                accumulate: false,
            } => write!(f, "scatter.{dtype}"),
            Key::Scatter {
                dtype,
                accumulate: true,
            } => write!(f, "scatteradd.{dtype}"),
            Key::Take {
                dtype,
                index,
                rank,
                axis,
            } => write!(f, "take.{dtype}.{index}.r{rank}.d{axis}"),
        }
    }
}

fn letters(kinds: &[Kind]) -> String {
    kinds.iter().map(|k| k.letter()).collect()
}

impl FromStr for Key {
    type Err = String;

    /// Decodes a key; the error says what is wrong with it.
    fn from_str(s: &str) -> Result<Key, String> {
        let key = parse(s).map_err(|why| format!("malformed kernel key `{s}`: {why}"))?;
        key.check()
            .map_err(|why| format!("invalid kernel key `{s}`: {why}"))?;
        if key.to_string() != s {
            return Err(format!(
                "malformed kernel key `{s}`: not in canonical form (`{key}`)"
            ));
        }
        Ok(key)
    }
}

/// The tokens of a key being decoded.
struct Tokens<'a> {
    rest: std::str::Split<'a, char>,
}

impl<'a> Tokens<'a> {
    fn next(&mut self, what: &str) -> Result<&'a str, String> {
        self.rest.next().ok_or_else(|| format!("missing {what}"))
    }

    fn reduce_op(&mut self) -> Result<ReduceOp, String> {
        let name = self.next("operator")?;
        ReduceOp::from_name(name).ok_or_else(|| format!("unknown reduction `{name}`"))
    }

    fn dtype(&mut self) -> Result<DType, String> {
        let t = self.next("dtype")?;
        DType::from_name(t).ok_or_else(|| format!("unknown dtype `{t}`"))
    }

    fn rank(&mut self) -> Result<u32, String> {
        let t = self.next("rank")?;
        t.strip_prefix('r')
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| format!("bad rank `{t}` (expected r<k>)"))
    }

    fn kinds<const N: usize>(&mut self) -> Result<[Kind; N], String> {
        let t = self.next("operand kinds")?;
        let kinds: Vec<Kind> = t.chars().filter_map(Kind::from_letter).collect();
        <[Kind; N]>::try_from(kinds)
            .ok()
            .filter(|_| t.len() == N)
            .ok_or_else(|| format!("bad operand kinds `{t}` (expected {N} of a, z, s)"))
    }

    fn end(mut self) -> Result<(), String> {
        match self.rest.next() {
            None => Ok(()),
            Some(t) => Err(format!("unexpected `{t}`")),
        }
    }
}

/// Decodes the tokens of `s` into a key, without checking that the key makes sense.
fn parse(s: &str) -> Result<Key, String> {
    let mut t = Tokens { rest: s.split('.') };
    let family = t.next("kernel family")?;
    let key = match family {
        "fill" => Key::Fill {
            dtype: t.dtype()?,
            rank: t.rank()?,
        },
        "copy" => {
            let (dtype, rank) = (t.dtype()?, t.rank()?);
            let [src] = t.kinds::<1>()?;
            Key::Copy { dtype, rank, src }
        }
        "cast" => Key::Cast {
            from: t.dtype()?,
            to: t.dtype()?,
            rank: t.rank()?,
        },
        "arange" => Key::Arange { dtype: t.dtype()? },
        "linspace" => Key::Linspace { dtype: t.dtype()? },
        "random" => Key::Random {
            dtype: t.dtype()?,
            rank: t.rank()?,
        },
        "binary" => {
            let name = t.next("operator")?;
            let op = BinOp::from_name(name).ok_or_else(|| format!("unknown operator `{name}`"))?;
            Key::Binary {
                op,
                dtype: t.dtype()?,
                rank: t.rank()?,
                kinds: t.kinds()?,
            }
        }
        "unary" => {
            let name = t.next("operator")?;
            let op = UnOp::from_name(name).ok_or_else(|| format!("unknown operator `{name}`"))?;
            Key::Unary {
                op,
                dtype: t.dtype()?,
                rank: t.rank()?,
            }
        }
        "select" => Key::Select {
            dtype: t.dtype()?,
            rank: t.rank()?,
            kinds: t.kinds()?,
        },
        "reduce" => {
            let op = t.reduce_op()?;
            Key::Reduce {
                op,
                dtype: t.dtype()?,
                rank: t.rank()?,
            }
        }
        "reduceaxes" | "reducerows" => {
            let op = t.reduce_op()?;
            let (dtype, rank) = (t.dtype()?, t.rank()?);
            let (letter, what) = if family == "reduceaxes" {
                ('m', "mask")
            } else {
                ('q', "reduced rank")
            };
            let tok = t.next(what)?;
            let n = tok
                .strip_prefix(letter)
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| format!("bad {what} `{tok}` (expected {letter}<n>)"))?;
            if family == "reduceaxes" {
                Key::ReduceAxes {
                    op,
                    dtype,
                    rank,
                    mask: n,
                }
            } else {
                Key::ReduceRows {
                    op,
                    dtype,
                    kept: rank,
                    reduced: n,
                }
            }
        }
        "treeblocks" => {
            let op = t.reduce_op()?;
            let (dtype, rank) = (t.dtype()?, t.rank()?);
            let tok = t.next("leaves")?;
            let leaves = tok
                .strip_prefix('l')
                .and_then(|n| n.parse::<u32>().ok().filter(|v| v.to_string() == n))
                .ok_or_else(|| format!("bad leaves `{tok}` (expected l<n>)"))?;
            Key::TreeBlocks {
                op,
                dtype,
                rank,
                leaves,
            }
        }
        "vecmat" => Key::Vecmat { dtype: t.dtype()? },
        "vecmat_rows" => Key::VecmatRows { dtype: t.dtype()? },
        "dot" => Key::Dot { dtype: t.dtype()? },
        "dotfold" => Key::DotFold { dtype: t.dtype()? },
        "mergepass" => Key::MergePass {
            dtype: t.dtype()?,
            indices: false,
        },
        "argmergepass" => Key::MergePass {
            dtype: t.dtype()?,
            indices: true,
        },
        "scatter" => Key::Scatter {
            dtype: t.dtype()?,
            accumulate: false,
        },
        "scatteradd" => Key::Scatter {
            dtype: t.dtype()?,
            accumulate: true,
        },
        "norm" => match t.next("norm step")? {
            "sumsq" => Key::SumSquares {
                dtype: t.dtype()?,
                rank: t.rank()?,
            },
            "sqrt" => Key::SqrtInPlace { dtype: t.dtype()? },
            other => return Err(format!("unknown norm step `{other}`")),
        },
        "matvec" => Key::Matvec { dtype: t.dtype()? },
        "matvec_parts" => Key::MatvecParts { dtype: t.dtype()? },
        "matmul" => Key::Matmul { dtype: t.dtype()? },
        "matmul_rows" => Key::MatmulRows { dtype: t.dtype()? },
        "diag" => match t.next("diag form")? {
            "extract" => Key::DiagExtract { dtype: t.dtype()? },
            "embed" => Key::DiagEmbed { dtype: t.dtype()? },
            other => return Err(format!("unknown diag form `{other}`")),
        },
        "cumsum" => Key::Cumsum {
            dtype: t.dtype()?,
            kept: t.rank()?,
        },
        "argrows" => Key::ArgRows {
            op: t.reduce_op()?,
            dtype: t.dtype()?,
            kept: t.rank()?,
        },
        "flatnonzero" => Key::FlatNonzero,
        "chunkcounts" => Key::ChunkCounts,
        "take" => {
            let (dtype, index, rank) = (t.dtype()?, t.dtype()?, t.rank()?);
            let tok = t.next("axis")?;
            let axis = tok
                .strip_prefix('d')
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| format!("bad axis `{tok}` (expected d<n>)"))?;
            Key::Take {
                dtype,
                index,
                rank,
                axis,
            }
        }
        other => return Err(format!("unknown kernel family `{other}`")),
    };
    t.end()?;
    Ok(key)
}

impl Key {
    /// The rank of the key's iteration space (0 for keys without one).
    pub fn rank(&self) -> u32 {
        match *self {
            Key::Fill { rank, .. }
            | Key::Copy { rank, .. }
            | Key::Cast { rank, .. }
            | Key::Random { rank, .. }
            | Key::Binary { rank, .. }
            | Key::Unary { rank, .. }
            | Key::Select { rank, .. }
            | Key::Reduce { rank, .. }
            | Key::ReduceAxes { rank, .. }
            | Key::TreeBlocks { rank, .. }
            | Key::SumSquares { rank, .. } => rank,
            Key::ReduceRows { kept, reduced, .. } => kept.saturating_add(reduced),
            Key::Cumsum { kept, .. } | Key::ArgRows { kept, .. } => kept.saturating_add(1),
            Key::Take { rank, .. } => rank,
            _ => 0,
        }
    }

    /// Checks that the key is one the operations could produce: a rank the IR allows, a dtype
    /// the operator accepts, and operand kinds that fit the rank.
    pub fn check(&self) -> Result<(), String> {
        if self.rank() > MAX_RANK {
            return Err(format!("rank {} is more than {MAX_RANK}", self.rank()));
        }
        match *self {
            Key::Scatter {
                dtype: DType::Bool,
                accumulate: true,
            } => Err("adding at positions of a bool array is not supported".to_string()),
            Key::Fill { .. }
            | Key::FlatNonzero
            | Key::ChunkCounts
            | Key::MergePass { .. }
            | Key::Scatter { .. }
            | Key::Linspace { .. }
            | Key::DiagExtract { .. }
            | Key::DiagEmbed { .. } => Ok(()),
            Key::Copy { rank, src, .. } => {
                if src == Kind::Scalar {
                    return Err("a copy's source is an array (a fill takes a scalar)".to_string());
                }
                check_kinds(rank, &[src])
            }
            Key::Cast { from, to, .. } if from == to => {
                Err("a cast to the same dtype is a copy".to_string())
            }
            Key::Cast { .. } => Ok(()),
            Key::Arange { dtype } => catalog::ARANGE_RULE.check("arange", dtype),
            Key::Random { dtype, .. } => catalog::RANDOM_RULE.check("random-uniform", dtype),
            Key::Binary {
                op,
                dtype,
                rank,
                kinds,
            } => {
                op.rule().check(op.name(), dtype)?;
                check_operands(rank, &kinds)
            }
            Key::Unary { op, dtype, .. } => op.rule().check(op.name(), dtype),
            Key::Select { rank, kinds, .. } => {
                if kinds[0] == Kind::Scalar {
                    return Err("the condition must be an array".to_string());
                }
                check_operands(rank, &kinds)
            }
            Key::Reduce { op, dtype, .. } => catalog::reduce_rule(op).check(op.name(), dtype),
            Key::Dot { dtype } | Key::DotFold { dtype } => catalog::LINALG_RULE.check("dot", dtype),
            Key::SumSquares { dtype, .. } | Key::SqrtInPlace { dtype } => {
                catalog::LINALG_RULE.check("norm", dtype)
            }
            Key::ReduceAxes {
                op,
                dtype,
                rank,
                mask,
            } => {
                if rank >= 32 || mask >> rank != 0 || mask == 0 {
                    return Err(format!(
                        "mask {mask} does not name dimensions of rank {rank}"
                    ));
                }
                catalog::reduce_rule(op).check(op.name(), dtype)
            }
            Key::ReduceRows {
                op, dtype, reduced, ..
            } => {
                if reduced == 0 {
                    return Err("a row reduction reduces at least one dimension".to_string());
                }
                catalog::reduce_rule(op).check(op.name(), dtype)
            }
            Key::TreeBlocks {
                op,
                dtype,
                rank,
                leaves,
            } => {
                if !leaves.is_power_of_two() || !(2..=16).contains(&leaves) {
                    return Err(format!(
                        "a tree level has 2, 4, 8 or 16 leaves, got {leaves}"
                    ));
                }
                if rank == 0 || !matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                    return Err(format!(
                        "a tree level needs a sum or product over rank 1 or more, got {} over \
                         rank {rank}",
                        op.name()
                    ));
                }
                catalog::LINALG_RULE.check(op.name(), dtype)
            }
            Key::Matvec { dtype } | Key::MatvecParts { dtype } => {
                catalog::LINALG_RULE.check("matvec", dtype)
            }
            Key::Vecmat { dtype } | Key::VecmatRows { dtype } => {
                catalog::LINALG_RULE.check("matvec", dtype)
            }
            Key::Matmul { dtype } | Key::MatmulRows { dtype } => {
                catalog::LINALG_RULE.check("matmul", dtype)
            }
            Key::Cumsum { dtype, kept } => {
                if kept == 0 {
                    return Err("a running sum is launched over at least one dimension".into());
                }
                catalog::reduce_rule(ReduceOp::Sum).check("cumsum", dtype)
            }
            Key::ArgRows {
                op, dtype, kept, ..
            } => {
                catalog::Rule::Signed.check("argmax", dtype)?;
                if kept == 0 {
                    return Err(
                        "a scan for a position is launched over at least one dimension".into(),
                    );
                }
                if !matches!(op, ReduceOp::Min | ReduceOp::Max) {
                    return Err(format!(
                        "a position is of the least or greatest element, not of a {}",
                        op.name()
                    ));
                }
                Ok(())
            }
            Key::Take {
                index, rank, axis, ..
            } => {
                if !matches!(index, DType::I32 | DType::I64) {
                    return Err(format!("positions must be integers, not {index}"));
                }
                if axis >= rank {
                    return Err(format!("axis {axis} is not a dimension of rank {rank}"));
                }
                Ok(())
            }
        }
    }
}

/// Checks the kinds of store operands: no 0-d broadcast into a 0-d output (there a 0-d
/// operand simply has the output's shape, so it is `a`).
fn check_kinds(rank: u32, kinds: &[Kind]) -> Result<(), String> {
    if rank == 0 && kinds.contains(&Kind::Zero) {
        return Err("a 0-d output takes its 0-d operands as arrays (a), not z".to_string());
    }
    Ok(())
}

/// Checks the kinds of the operands of a kernel whose output's shape is an operand's: as
/// [`check_kinds`], and at least one operand is an array of the output's shape.
fn check_operands(rank: u32, kinds: &[Kind]) -> Result<(), String> {
    if !kinds.contains(&Kind::Array) {
        return Err("no operand is an array of the output's shape".to_string());
    }
    check_kinds(rank, kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: &str) -> Key {
        let key: Key = s
            .parse()
            .unwrap_or_else(|e| panic!("`{s}` should parse: {e}"));
        assert_eq!(key.to_string(), s);
        key
    }

    #[test]
    fn keys_round_trip() {
        for s in [
            "fill.f64.r2",
            "fill.bool.r0",
            "copy.i32.r1.a",
            "copy.f32.r3.z",
            "cast.f64.i32.r2",
            "arange.i64",
            "linspace.f32",
            "random.f64.r3",
            "binary.add.f64.r2.as",
            "binary.less-equal.i32.r1.za",
            "binary.logical-and.bool.r0.aa",
            "unary.logical-not.bool.r1",
            "unary.erf.f32.r4",
            "select.f64.r2.asz",
            "select.i64.r0.ass",
            "reduce.max.bool.r2",
            "reduce.sum.i64.r1",
            "dot.f32",
            "norm.sumsq.f64.r2",
            "norm.sqrt.f64",
            "matvec.f64",
            "matvec_parts.f32",
            "matmul.f32",
            "diag.extract.i64",
            "diag.embed.bool",
            "cumsum.f64.r1",
            "cumsum.i64.r3",
            "take.f64.i64.r1.d0",
            "take.bool.i32.r3.d2",
            "treeblocks.sum.f64.r5.l16",
            "treeblocks.prod.f32.r1.l2",
        ] {
            round_trip(s);
        }
    }

    #[test]
    fn decoding_gives_the_fields() {
        assert_eq!(
            round_trip("binary.add.f64.r2.as"),
            Key::Binary {
                op: BinOp::Add,
                dtype: DType::F64,
                rank: 2,
                kinds: [Kind::Array, Kind::Scalar],
            }
        );
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for s in [
            "",
            "nope",
            "fill",
            "fill.f64",
            "fill.f65.r1",
            "fill.f64.2",
            "fill.f64.r",
            "fill.f64.r-1",
            "fill.f64.r01",
            "fill.f64.r+1",
            "fill.f64.r1.extra",
            "treeblocks.sum.f64.r2",
            "treeblocks.sum.f64.r2.l3",
            "treeblocks.sum.f64.r2.l1",
            "treeblocks.sum.f64.r2.l32",
            "treeblocks.sum.f64.r2.l08",
            "treeblocks.max.f64.r2.l16",
            "fill.f64.r17",
            "fill.f64.r99999999999",
            "copy.f64.r1.s",
            "copy.f64.r0.z",
            "copy.f64.r1.aa",
            "cast.f64.f64.r1",
            "arange.bool",
            "random.i64.r1",
            "binary.add.bool.r1.aa",
            "binary.pow.i64.r1.aa",
            "binary.logical-or.f64.r1.aa",
            "binary.add.f64.r1.ss",
            "binary.add.f64.r1.zz",
            "binary.add.f64.r0.az",
            "binary.add.f64.r1.a",
            "binary.add.f64.r1.aaa",
            "binary.add.f64.r1.ax",
            "binary.fma.f64.r1.aa",
            "unary.sqrt.i32.r1",
            "unary.neg.bool.r1",
            "select.f64.r1.saa",
            "select.f64.r1.zss",
            "reduce.sum.bool.r1",
            "reduce.avg.f64.r1",
            "dot.i64",
            "norm.sqrt.i32",
            "norm.cube.f64",
            "matmul.bool",
            "diag.flip.f64",
            "cumsum.f64.r0",
            "cumsum.bool.r1",
            "take.f64.f64.r1.d0",
            "take.f64.i64.r2.d2",
            "take.f64.i64.r1.x0",
            "binary.add.f64.r2.as.",
            ".binary.add.f64.r2.as",
            "binary..add.f64.r2.as",
            "BINARY.add.f64.r2.as",
        ] {
            assert!(s.parse::<Key>().is_err(), "`{s}` should be rejected");
        }
    }

    #[test]
    fn errors_quote_the_key() {
        let e = "binary.pow.i64.r1.aa"
            .parse::<Key>()
            .err()
            .unwrap_or_default();
        assert!(e.contains("`binary.pow.i64.r1.aa`"), "{e}");
        assert!(e.contains("float"), "{e}");
    }
}
