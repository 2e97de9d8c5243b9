//! A kernel into steps: [`lower_kernel`] splits the top-level body into sequential and
//! parallel steps and defines each one's function; with what it takes ([`Target`]) and what
//! it returns ([`Lowered`]).

use std::collections::{HashMap, HashSet};

use cranelift_codegen::Context;
use cranelift_codegen::ir::{AbiParam, types};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};
use weft_ir::{DType, Inst, Kernel, Op, ReduceOp, validate::Types};

use super::access::{FaultSite, Faults, Obligation};
use super::inst::operands;
use super::layout::Layout;
use super::reduce::RedBuf;
use super::toplevel::TopLevel;
use super::{LResult, MAX_DEPTH, StepCx, jam, vector, wide};
use crate::math::MathFn;

/// What kind of step a function is.
#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Sequential,
    Parallel {
        /// Index into [`Layout::stores`] of the store that gives the iteration space.
        over: usize,
        obligations: Vec<Obligation>,
        reds: Vec<RedBuf>,
        /// Whether the launcher may cut the loop into chunks by the thread count as well as
        /// by its shape: its points run `for` loops (so a point may be much work), and no
        /// float sum or product goes through a chunk buffer (whose result depends on the
        /// chunks).
        spread: bool,
        /// Whether the step leaves its grouped leaf stores ([`Target::grouped`]) grouped:
        /// each whole aligned group of eight points in a call's range as one node, in the
        /// group's first slot (see [`weft_ir::reduction::grouped_nodes_with`]).
        grouped: bool,
    },
}

/// One compiled (not yet finalized) step.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub kind: StepKind,
    pub func: FuncId,
    /// Whether `func` is the vector function of a parallel step (see [`vector`]). It then
    /// also runs, in scalar code, rows whose contiguous stores have other strides.
    pub vectorized: bool,
    /// The instruction set of the wide body in which the vector function runs the bulk of
    /// each row, if it has one.
    pub wide: Option<wide::Isa>,
    /// Why a vectorized loop has no wide body on a path that has them.
    pub wide_refusal: Option<String>,
    /// Whether that wide body runs whole rows, its last partial step masked (see
    /// [`wide::WideBody::masks`]).
    pub whole_rows: bool,
}

/// The result of lowering a kernel.
#[derive(Debug)]
pub(crate) struct Lowered {
    pub layout: Layout,
    pub steps: Vec<Step>,
    pub faults: Vec<FaultSite>,
    /// Constant tables that the compiled code reads at fixed addresses (see
    /// [`vector::ConstTable`]): they must live as long as the code may run.
    pub tables: Vec<vector::ConstTable>,
    /// How many loops took each of the lowerings that [`LoopCounts`] counts.
    pub loop_counts: LoopCounts,
}

/// How many loops of a kernel took the lowerings beyond plain scalar code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoopCounts {
    /// As 128-bit vectors of lanes (see [`lanes`](super::lanes)), or of iterations (see
    /// [`iterations`](super::iterations)).
    pub vector: usize,
    /// Of those, the loops whose bulk runs in a wide body (see [`wide::compile_fold`]).
    pub wide: usize,
    /// Parallel loops that run several points at once (see [`jam`]).
    pub jammed: usize,
    /// Scalar `for` loops whose preheader prefetches the streams they read (see
    /// [`prefetch`](super::prefetch)).
    pub prefetched: usize,
    /// Scalar `for` loops that run two iterations per trip (see [`pairs`](super::pairs)).
    pub paired: usize,
    /// Bytes of machine code the kernel defined (every step, copy and wide body).
    pub code_bytes: usize,
}

/// The imported math shims, declared once per module.
pub(crate) struct MathDecls {
    pub ids: HashMap<(MathFn, DType), FuncId>,
}

/// What the back end needs from its owner to lower a kernel.
pub(crate) struct Target<'a> {
    pub module: &'a mut JITModule,
    pub ctx: &'a mut Context,
    pub math: &'a MathDecls,
    /// The types of the kernel's values (from validation).
    pub types: &'a Types,
    /// What the vector lowering may use, or `None` to compile scalar code only.
    pub simd: Option<vector::Features>,
    /// The ISA that compiles vector functions (see [`vector`]).
    pub vector_isa: &'a dyn TargetIsa,
    /// The address of the back end's cancel flag (a `u32`), read on every loop back edge.
    pub cancel_flag: i64,
    /// Compiled functions from earlier compiles and processes (see [`crate::function_cache`]).
    pub function_cache: &'a mut crate::function_cache::FunctionCache,
    /// The loops cut into segments (see [`crate::strips`]): each compiles to one step.
    pub groups: &'a [crate::strips::Group],
    /// The hidden store parameters private to each chunk (see
    /// [`StoreSlot::private`](super::layout::StoreSlot::private)).
    pub private: &'a [u32],
    /// The leaf stores that a scalar point loop may fill *grouped* (see
    /// [`weft_ir::reduction::grouped_nodes_with`]), with their operators: each point stores
    /// its one contribution at the loop's index.
    pub grouped: &'a [(u32, ReduceOp)],
    /// Whether scalar `for` loops prefetch the streams they read (see
    /// [`prefetch`](super::prefetch)).
    pub prefetch: bool,
}

/// Whether the top-level parallel loop at position `pos` of `kernel` has a vector variant
/// (see [`vector::analyze`]) with `features`.
pub(crate) fn vectorizes(
    kernel: &Kernel,
    pos: usize,
    types: &Types,
    features: vector::Features,
) -> bool {
    let Some(Op::Parallel(pl)) = kernel.body.get(pos).map(|i| &i.op) else {
        return false;
    };
    Layout::new(kernel).is_ok_and(|layout| vector::analyze(pl, &layout, types, features).is_ok())
}

/// Lowers `kernel` into functions of `target.module` (defined, not finalized).
pub(crate) fn lower_kernel(kernel: &Kernel, target: Target<'_>) -> LResult<Lowered> {
    // Every value is defined once.
    let mut seen = HashSet::new();
    let mut dup = None;
    let mut bound = 0u32;
    check_depth(&kernel.body, 0)?;
    weft_ir::visit_defs(&kernel.body, &mut |v| {
        bound = bound.max(v.0.saturating_add(1));
        if !seen.insert(v) && dup.is_none() {
            dup = Some(v);
        }
    });
    if let Some(v) = dup {
        return Err(format!("value {v} is defined more than once"));
    }

    let mut layout = Layout::new(kernel)?;

    // Top-level analysis: which values are pure functions of the parameters.
    let mut top = TopLevel {
        defs: HashMap::new(),
        remat: HashSet::new(),
        spill: HashMap::new(),
    };
    for (pos, inst) in kernel.body.iter().enumerate() {
        // A value operation is a pure function of the frame's parameter words, so a top-level
        // instance may be recomputed in any function that needs its value.
        let remat = inst.op.is_value()
            && operands(&inst.op)
                .iter()
                .all(|v| top.remat.contains(v) && top.defs.contains_key(v));
        for &r in &inst.results {
            top.defs.insert(r, (pos, inst));
            if remat {
                top.remat.insert(r);
            }
        }
    }

    // Split the body into steps: parallel loops, and runs of other instructions that need to
    // run (anything not recomputable).
    enum Item {
        Seq(std::ops::Range<usize>),
        Par(usize),
    }
    let mut items = Vec::new();
    let mut start = 0;
    let body = &kernel.body;
    for pos in 0..=body.len() {
        let at_par = pos < body.len() && matches!(body[pos].op, Op::Parallel(_));
        if pos == body.len() || at_par {
            let run = &body[start..pos];
            let needed = run.iter().any(|inst| {
                !inst.op.is_value() || inst.results.iter().any(|r| !top.remat.contains(r))
            });
            if needed {
                items.push(Item::Seq(start..pos));
                for inst in run {
                    for &r in &inst.results {
                        if !top.remat.contains(&r) {
                            top.spill.insert(r, layout.frame_len);
                            layout.frame_len += 1;
                        }
                    }
                }
            }
            if at_par {
                items.push(Item::Par(pos));
            }
            start = pos + 1;
        }
    }

    // Frame words are addressed with 32-bit byte offsets.
    if layout.frame_len > (i32::MAX / 8) as usize {
        return Err(format!(
            "the kernel needs {} frame words; the CPU back end supports at most {}",
            layout.frame_len,
            i32::MAX / 8
        ));
    }

    let mut faults = Faults::default();
    let mut steps = Vec::new();
    let Target {
        module,
        ctx,
        math,
        types: value_types,
        simd,
        vector_isa,
        cancel_flag,
        function_cache,
        groups,
        private,
        grouped,
        prefetch,
    } = target;
    for slot in &mut layout.stores {
        slot.private = private.contains(&slot.param);
    }
    // Row loops run several points at once where the vector code takes them (see [`jam`]):
    // four rows beside wide bodies, two beside 128-bit vectors (whose sixteen registers
    // hold two rows' lanes).
    let rows: &[usize] = match simd.map(|f| f.wide) {
        Some(Some(_)) => &[4, 2],
        Some(None) => &[2],
        None => &[],
    };
    let mut fresh = jam::Fresh::new(bound);
    let mut jams: HashMap<usize, Vec<jam::Jam>> = HashMap::new();
    for (pos, inst) in body.iter().enumerate() {
        if let Op::Parallel(pl) = &inst.op {
            let found: Vec<jam::Jam> = rows
                .iter()
                .filter_map(|&r| jam::jam(pl, r, value_types, &mut fresh).ok())
                .collect();
            if !found.is_empty() {
                jams.insert(pos, found);
            }
        }
    }
    let jam_types = value_types.with(&fresh.types);
    let fconfig = module.target_config();
    let ptr_ty = fconfig.pointer_type();
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));

    let mut fctx = FunctionBuilderContext::new();
    let mut spill_types = HashMap::new();
    let mut tables = Vec::new();
    let mut loop_counts = LoopCounts::default();
    let mut fcx = StepCx {
        tables: &mut tables,
        function_cache,
        module,
        ctx,
        math,
        fctx: &mut fctx,
        sig: &sig,
        layout: &layout,
        top: &top,
        faults: &mut faults,
        spill_types: &mut spill_types,
        ptr_ty,
        types: &jam_types,
        lanes: simd.map(|f| f.wide),
        loop_counts: &mut loop_counts,
        cancel_flag,
        jams: &jams,
        grouped,
        whole: true,
        prefetch,
    };
    for item in items {
        let (pl, pos) = match item {
            Item::Seq(range) => {
                let func = fcx.define(None, &mut |fl| {
                    fl.build_sequential(&body[range.clone()], range.start)
                })?;
                steps.push(Step {
                    kind: StepKind::Sequential,
                    func,
                    vectorized: false,
                    wide: None,
                    wide_refusal: None,
                    whole_rows: false,
                });
                continue;
            }
            Item::Par(pos) => {
                let Op::Parallel(pl) = &body[pos].op else {
                    return Err("internal: parallel item is not a parallel loop".into());
                };
                if !body[pos].results.is_empty() {
                    return Err("a parallel loop defines no results".into());
                }
                (pl, pos)
            }
        };
        match groups.iter().find(|g| g.first == pos) {
            Some(g) => {
                let mut segs = Vec::with_capacity(g.loops);
                let mut loops = Vec::with_capacity(g.loops);
                for (p, inst) in body.iter().enumerate().skip(g.first).take(g.loops) {
                    let Op::Parallel(seg) = &inst.op else {
                        return Err("internal: a segment is not a parallel loop".into());
                    };
                    // (A segment's leaves stay one per point: its step is the group's.)
                    fcx.whole = false;
                    let seg_step = fcx.lower_loop(seg, p, simd, vector_isa);
                    fcx.whole = true;
                    segs.push(seg_step?);
                    loops.push(seg);
                }
                steps.push(fcx.lower_group(&loops, g, segs)?);
            }
            None => {
                if groups
                    .iter()
                    .any(|g| (g.first + 1..g.first + g.loops).contains(&pos))
                {
                    continue;
                }
                steps.push(fcx.lower_loop(pl, pos, simd, vector_isa)?);
            }
        }
    }
    fcx.module.clear_context(fcx.ctx);
    Ok(Lowered {
        layout,
        steps,
        faults: faults.sites,
        tables,
        loop_counts,
    })
}

fn check_depth(body: &[Inst], depth: usize) -> LResult<()> {
    if depth > MAX_DEPTH {
        return Err(format!("loops nested deeper than {MAX_DEPTH}"));
    }
    for inst in body {
        match &inst.op {
            Op::For(l) => check_depth(&l.body, depth + 1)?,
            Op::Parallel(p) => check_depth(&p.body, depth + 1)?,
            _ => {}
        }
    }
    Ok(())
}
