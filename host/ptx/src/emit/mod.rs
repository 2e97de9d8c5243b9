//! The PTX emitter: a module of entries, one per top-level parallel loop.
//!
//! [`emit`] plans which top-level instructions each entry needs (the values its loop uses,
//! and what they are computed from), refuses top-level loads that an earlier entry may have
//! overwritten by the time a later one would recompute them, and has `body` lower the
//! instructions.

mod body;

use std::collections::HashSet;
use std::fmt::Write;

use weft_ir::{Inst, Op, ParallelLoop, ValidKernel, ValueId, visit_defs};

use crate::abi::{self, FaultSite};
use crate::{Error, Result};
use body::Body;
pub use body::LANES;

/// The PTX ISA version the module declares.
pub const PTX_VERSION: &str = "7.8";

/// The oldest GPU architecture the module targets (Ampere); the driver compiles it for newer
/// ones.
pub const PTX_TARGET: &str = "sm_80";

/// Threads per block of an entry over a linear index.
pub const BLOCK_THREADS: u32 = 256;

/// Levels of the canonical tree a rank-1 entry's block combines before it writes its leaves
/// (`emit/body/group.rs`): one per doubling up to [`BLOCK_THREADS`].
pub const GROUP_LEVELS: u32 = BLOCK_THREADS.trailing_zeros();

/// The block of an entry over rows and columns ([`Entry::rows`]): `x` along columns, `y`
/// along rows.
pub const ROWS_BLOCK: (u32, u32) = (32, 8);

/// A kernel as PTX: the module text and what the launcher needs to run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// The PTX text: every entry and its narrow variant.
    pub text: String,
    /// The same module with only the 64-bit entries (`[0]`) or only the narrow variants
    /// (`[1]`, [`Entry::narrow`]): the launcher loads each on first use, so the driver's JIT
    /// compiles the variants a program runs, not all of them.
    pub variants: [String; 2],
    /// The entries, in the order the launcher runs them.
    pub entries: Vec<Entry>,
    /// The index checks, by fault code minus one.
    pub faults: Vec<FaultSite>,
}

/// One entry of a module: one top-level parallel loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the module.
    pub name: String,
    /// The store parameter whose sub-store is the loop's iteration space: the launcher sizes
    /// the grid by its element count (every thread strides over the rest).
    pub over: u32,
    /// The loop's float sums and products into 0-d stores, in the order of the entry's
    /// `leaf_p{i}` parameters.
    pub leaves: Vec<Leaf>,
    /// The loop's element trees ([`weft_ir::reduction::element_trees`]: a rank-1 loop's
    /// float sums or products into a store of rank 1 or more, once per point and element),
    /// in the order of the entry's `tree_p{i}` parameters. Such an entry runs a thread per
    /// *unit* of the loop's points: a whole aligned block of the canonical order, or a
    /// loose point of a block the sub-store holds only part of (`units_head` of them before
    /// the first whole block, the rest after `units_whole_end`). Unit `u` writes row `u` of
    /// each tree buffer (one value per element of the target's sub-store, row-major): its
    /// points' contributions folded in point order from the exact identity. The launcher
    /// hands each row to the element's [`weft_ir::reduction::Partial::blocked`] as a block
    /// or a point.
    pub trees: Vec<Leaf>,
    /// The same entry with 32-bit index arithmetic (`{name}_n32`): each access's offset is
    /// computed in 32 bits and widened once. The launcher runs it where every store
    /// argument's elements lie within `i32` offsets of its first ([`fits_narrow`]), which
    /// makes every checked index's offset fit.
    pub narrow: String,
    /// Whether the entry runs on a 2-D grid ([`ROWS_BLOCK`]; a rank-2 loop): `y` threads
    /// stride over dimension 0, `x` threads over dimension 1. Otherwise a 1-D grid of
    /// [`BLOCK_THREADS`]-thread blocks strides over the linear index.
    pub rows: bool,
    /// Threads per point of a 1-D entry: 1, or [`LANES`] where a rank-1 loop's points run a
    /// fold's lanes on a group of threads each (its loop of eight independent partials split
    /// across the group, which meets in shared memory; see `emit/body/lanes.rs`).
    pub lanes: u32,
    /// The level of the canonical tree the entry's leaf buffers hold: 0, a leaf per point;
    /// [`GROUP_LEVELS`] where the block combined the first levels (a rank-1 loop that does
    /// not split lanes): every complete aligned node of at most that level lies at its first
    /// leaf, and only those slots are written.
    pub leaf_level: u32,
}

/// A float sum or product of a parallel loop into a 0-d store, kept in the canonical order
/// ([`weft_ir::reduction`]): each point folds its contributions, in execution order from the
/// exact identity, in a register, and writes the result into the leaf buffer at the point's
/// row-major index in the loop's sub-store (so the buffer holds one value per point, the
/// leaves of the canonical tree). The launcher reduces the buffer by the canonical tree; the
/// entry never touches the store itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The 0-d store parameter reduced into.
    pub param: u32,
    /// The operator (`sum` or `prod`).
    pub op: weft_ir::ReduceOp,
    /// The element type (`f32` or `f64`).
    pub dtype: weft_ir::DType,
}

/// `name` as the text of a one-line PTX comment: control characters (a NUL, which the
/// driver's C string would cut at, a line break, which would end the comment) become spaces,
/// and nothing else can leave the comment.
fn comment_text(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Lowers a validated, math-lowered kernel to a PTX module.
pub fn emit(kernel: &ValidKernel) -> Result<Module> {
    // PTX has no `fmod`: float remainders become integer arithmetic and a loop first.
    let lowered;
    let kernel = if weft_ir::passes::rem::has_float_rem(kernel.kernel()) {
        let k = weft_ir::passes::rem::lower_float_rem(kernel.kernel());
        lowered = ValidKernel::new(k).map_err(|e| Error::Unsupported {
            kernel: kernel.kernel().name.clone(),
            message: format!("float rem lowering: {}", e.message),
        })?;
        &lowered
    } else {
        kernel
    };
    let k = kernel.kernel();
    let types = kernel.types();
    let unsupported = |message: String| Error::Unsupported {
        kernel: k.name.clone(),
        message,
    };
    let mut text = String::new();
    let _ = writeln!(text, "//");
    let _ = writeln!(text, "// weft kernel: {}", comment_text(&k.name));
    let _ = writeln!(text, "//");
    let _ = writeln!(text, ".version {PTX_VERSION}");
    let _ = writeln!(text, ".target {PTX_TARGET}");
    let _ = writeln!(text, ".address_size 64");
    let mut variants = [text.clone(), text.clone()];
    let mut all = text;
    let abi = abi::params_of(&k.params);
    let mut faults = Vec::new();
    let mut entries = Vec::new();
    // Where each top-level value is defined, and which top-level positions hold loops.
    let mut def_at = std::collections::HashMap::new();
    for (pos, inst) in k.body.iter().enumerate() {
        visit_defs(std::slice::from_ref(inst), &mut |v| {
            def_at.insert(v, pos);
        });
    }
    for (pos, inst) in k.body.iter().enumerate() {
        let Op::Parallel(lp) = &inst.op else {
            continue;
        };
        let needed = needed_top_level(&k.body, lp, &def_at);
        // A top-level load recomputed here after an earlier loop may have written memory
        // would read the new contents, not the ones the IR's order gives it.
        for &at in &needed {
            let reads = matches!(k.body[at].op, Op::Load(_) | Op::For(_));
            let written_between = k.body[at + 1..pos]
                .iter()
                .any(|i| matches!(i.op, Op::Parallel(_)));
            if reads && written_between {
                return Err(unsupported(format!(
                    "the top-level `{}` (instruction {at}) is used by the parallel loop at \
                     instruction {pos}, after a parallel loop between them may have written \
                     what it reads",
                    weft_ir::text::inst_head(&k.body[at])
                )));
            }
        }
        let name = format!("weft_{}", entries.len());
        let narrow = format!("{name}_n32");
        let mut shape = None;
        for (entry_name, narrow_offsets) in [(&name, false), (&narrow, true)] {
            let mut text = String::new();
            let mut b = Body::new(k, types, &mut faults, narrow_offsets);
            for &at in &needed {
                b.inst(&k.body[at]).map_err(unsupported)?;
            }
            let (leaves, trees) = b.parallel(lp).map_err(unsupported)?;
            let lanes = if b.lanes_entry { LANES } else { 1 };
            let leaf_level = if b.group_slots.is_some() {
                GROUP_LEVELS
            } else {
                0
            };
            let mut params = abi.clone();
            params.extend(
                leaves
                    .iter()
                    .map(|l| abi::AbiParam::Leaf { param: l.param }),
            );
            if !trees.is_empty() {
                params.push(abi::AbiParam::UnitsHead);
                params.push(abi::AbiParam::UnitsWholeEnd);
                params.extend(trees.iter().map(|l| abi::AbiParam::Tree { param: l.param }));
            }
            let _ = writeln!(text);
            let _ = writeln!(text, ".visible .entry {entry_name}(");
            for (i, p) in params.iter().enumerate() {
                let comma = if i + 1 < params.len() { "," } else { "" };
                let _ = writeln!(text, "    .param .{} {}{comma}", p.ptx_type(), p.name());
            }
            let _ = writeln!(text, ")");
            let rows = lp.indices.len() == 2 && trees.is_empty();
            if rows {
                let _ = writeln!(text, ".maxntid {}, {}, 1", ROWS_BLOCK.0, ROWS_BLOCK.1);
            } else {
                let _ = writeln!(text, ".maxntid {BLOCK_THREADS}, 1, 1");
            }
            let _ = writeln!(text, "{{");
            b.finish(&mut text);
            let _ = writeln!(text, "}}");
            variants[usize::from(narrow_offsets)].push_str(&text);
            all.push_str(&text);
            shape.get_or_insert((leaves, trees, rows, lanes, leaf_level));
        }
        let (leaves, trees, rows, lanes, leaf_level) =
            shape.ok_or_else(|| unsupported("no entry".to_string()))?;
        entries.push(Entry {
            name,
            narrow,
            over: lp.over,
            leaves,
            trees,
            rows,
            lanes,
            leaf_level,
        });
    }
    Ok(Module {
        text: all,
        variants,
        entries,
        faults,
    })
}

/// Whether a store argument of `extents` and `strides` (in elements) may run an entry's
/// narrow variant ([`Entry::narrow`]): every element's offset from the first, and every
/// extent, fits in an `i32`.
pub fn fits_narrow(extents: &[i64], strides: &[i64]) -> bool {
    let mut span: i128 = 0;
    for (&e, &s) in extents.iter().zip(strides) {
        if e <= 0 {
            return true;
        }
        if e > i64::from(i32::MAX) {
            return false;
        }
        span += i128::from(e - 1) * i128::from(s).abs();
    }
    span <= i128::from(i32::MAX)
}

/// The positions of the top-level instructions that loop `lp` needs: those defining the
/// values it uses from outside, and transitively what those use, in program order.
fn needed_top_level(
    body: &[Inst],
    lp: &ParallelLoop,
    def_at: &std::collections::HashMap<ValueId, usize>,
) -> Vec<usize> {
    let mut needed = HashSet::new();
    let mut work: Vec<ValueId> = Vec::new();
    uses(&lp.body, &mut |v| work.push(v));
    while let Some(v) = work.pop() {
        let Some(&pos) = def_at.get(&v) else {
            continue;
        };
        if matches!(body[pos].op, Op::Parallel(_)) || !needed.insert(pos) {
            continue;
        }
        uses(std::slice::from_ref(&body[pos]), &mut |u| work.push(u));
    }
    let mut out: Vec<usize> = needed.into_iter().collect();
    out.sort_unstable();
    out
}

/// Calls `f` on every value that `body` uses (operands, indices, loop bounds, initial and
/// yielded values), at any depth, including values it defines itself.
fn uses(body: &[Inst], f: &mut impl FnMut(ValueId)) {
    for inst in body {
        weft_ir::passes::op_uses(&inst.op, f);
        match &inst.op {
            Op::Parallel(p) => uses(&p.body, f),
            Op::For(l) => {
                l.yields.iter().copied().for_each(&mut *f);
                uses(&l.body, f);
            }
            _ => {}
        }
    }
}
