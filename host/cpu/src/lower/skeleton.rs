//! Function skeletons: the entry block, sequential steps, and parallel steps: their setup
//! and exit, and their loop nests (the general copy, the copy for unit innermost strides and
//! the copy where every origin the body reads is zero).

use std::collections::{BTreeSet, HashMap};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, MemFlagsData, Value, types};
use weft_ir::{DType, Inst, Op, ParallelLoop, Privilege, ValueId};

use super::access::Obligation;
use super::kernel::StepKind;
use super::reduce::{RedBuf, RedMode};
use super::toplevel::Scan;
use super::{FnLower, LResult, frame_flags};

/// State of a parallel step being lowered.
pub(super) struct ParCx {
    /// Loop index value -> its dimension.
    pub(super) loop_dims: HashMap<ValueId, usize>,
    pub(super) obligations: BTreeSet<Obligation>,
}

/// What [`FnLower::parallel_setup`] leaves for the rest of a parallel step's function.
pub(super) struct ParSetup {
    pub(super) lo: Value,
    pub(super) hi: Value,
    /// Index into [`Layout::stores`](super::Layout::stores) of the store that gives the
    /// iteration space.
    pub(super) over: usize,
    pub(super) rank: usize,
    pub(super) reds: Vec<RedBuf>,
    /// The loop's extent on each dimension.
    pub(super) over_ext: Vec<Value>,
}

impl FnLower<'_, '_> {
    /// Creates the entry block and binds the function's parameters.
    pub(super) fn entry(&mut self) -> (Value, Value) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let p = self.b.block_params(entry).to_vec();
        self.frame = p[0];
        self.red = p[1];
        (p[2], p[3])
    }

    /// A sequential step: `insts` are the top-level instructions from position `pos`.
    pub(super) fn build_sequential(&mut self, insts: &[Inst], pos: usize) -> LResult<()> {
        self.entry();
        let mut scan = Scan::default();
        scan.body(insts, 0)?;
        self.materialize(&scan, pos)?;
        for &param in &scan.accessed {
            self.load_view(param, None)?;
        }
        for inst in insts {
            self.lower_inst(inst)?;
        }
        // Spill what later steps need.
        for inst in insts {
            for r in &inst.results {
                if let Some(&word) = self.top.spill.get(r) {
                    let (val, ty) = self.val(*r)?;
                    self.spill_types.insert(*r, ty);
                    self.b
                        .ins()
                        .store(MemFlagsData::trusted(), val, self.frame, (word * 8) as i32);
                }
            }
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.finish();
        Ok(())
    }

    /// The common start of a parallel step's function (scalar or vector) for the top-level loop
    /// `pl` at position `pos`: binds the function's parameters, recomputes or loads the
    /// top-level values the body uses, loads the views of the stores it accesses, decides how
    /// each reduction target is reduced into, and loads the loop's extents.
    pub(super) fn parallel_setup(&mut self, pl: &ParallelLoop, pos: usize) -> LResult<ParSetup> {
        let (lo, hi) = self.entry();
        let (over, over_slot) = self.layout.store(pl.over)?;
        let rank = over_slot.rank;
        if pl.indices.len() != rank {
            return Err(format!(
                "parallel loop over parameter {} (rank {rank}) has {} indices",
                pl.over,
                pl.indices.len()
            ));
        }
        let mut scan = Scan::default();
        scan.body(&pl.body, 1)?;
        self.materialize(&scan, pos)?;

        // Reduction targets: in place when every reduction's dim-0 index is the loop's
        // dim-0 index (chunks then touch disjoint rows), else a chunk-private buffer.
        let mut reds = Vec::new();
        for (&param, firsts) in &scan.reduces {
            let (store, slot) = self.layout.store(param)?;
            let Privilege::Reduce(op) = slot.privilege else {
                return Err(format!(
                    "reduction into store parameter {param}, which has {:?} privilege",
                    slot.privilege
                ));
            };
            let in_place =
                rank >= 1 && slot.rank >= 1 && firsts.iter().all(|f| *f == Some(pl.indices[0]));
            if !in_place {
                let mode = if slot.rank == 0 {
                    RedMode::Register
                } else {
                    RedMode::Buffer
                };
                reds.push(RedBuf { store, op, mode });
            }
        }
        reds.sort_by_key(|r| r.store);
        let modes: HashMap<u32, (usize, RedMode)> = reds
            .iter()
            .enumerate()
            .map(|(i, r)| (self.layout.stores[r.store].param, (i, r.mode)))
            .collect();
        for &param in &scan.accessed {
            self.load_view(param, modes.get(&param).copied())?;
        }
        let over_ext: Vec<Value> = (0..rank)
            .map(|d| self.frame_word(types::I64, over_slot.extent(d)))
            .collect();

        self.par = Some(ParCx {
            loop_dims: pl
                .indices
                .iter()
                .enumerate()
                .map(|(d, &v)| (v, d))
                .collect(),
            obligations: BTreeSet::new(),
        });
        Ok(ParSetup {
            lo,
            hi,
            over,
            rank,
            reds,
            over_ext,
        })
    }

    /// Writes the register accumulators of rank-0 reduction targets into their one-element
    /// buffers (at the current position, the function's exit), returns 0 and finishes the
    /// function.
    pub(super) fn parallel_exit(
        &mut self,
        reds: &[RedBuf],
        finals: &HashMap<u32, Value>,
    ) -> LResult<()> {
        for (i, r) in reds.iter().enumerate() {
            if r.mode == RedMode::Register {
                let param = self.layout.stores[r.store].param;
                let val = match finals.get(&param) {
                    Some(&v) => v,
                    None => {
                        let Some(acc) = self.views.get(&param).and_then(|v| v.acc) else {
                            continue;
                        };
                        self.b.use_var(acc)
                    }
                };
                let ptr = self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32);
                self.b.ins().store(MemFlagsData::trusted(), val, ptr, 0);
            }
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.finish();
        Ok(())
    }

    /// A parallel step for the top-level loop `pl` at position `pos`.
    pub(super) fn build_parallel(&mut self, pl: &ParallelLoop, pos: usize) -> LResult<StepKind> {
        let ParSetup {
            lo,
            hi,
            over,
            rank,
            reds,
            over_ext,
        } = self.parallel_setup(pl, pos)?;
        let exit = self.b.create_block();
        let mut grouped = false;
        if rank == 0 {
            if has_for_loop(&pl.body) {
                // One point whose `for` loops run over rows (a short dot product folded in
                // lanes): a copy for unit innermost strides, where the lanes vectorize.
                let general = self.views.clone();
                let unit = self.assume_unit_inner()?;
                let (fast, slow) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(unit, fast, &[], slow, &[]);
                self.b.switch_to_block(fast);
                self.lower_body(&pl.body)?;
                self.b.ins().jump(exit, &[]);
                self.views = general;
                self.b.switch_to_block(slow);
            }
            self.lower_body(&pl.body)?;
            self.b.ins().jump(exit, &[]);
        } else {
            let go = self.rows_guard(lo, hi, &over_ext);
            let versioned = has_for_loop(&pl.body);
            // Rows with `for` loops inside that reduce into leaf stores: eight points at a time
            // where they can, their contributions combined in registers (unless the loop
            // jams, which keeps one leaf per point).
            let targets = if rank == 1 && versioned && !self.jams.contains_key(&pos) {
                self.group_targets(pl)?
            } else {
                Vec::new()
            };
            grouped = !targets.is_empty();
            let start = self.b.create_block();
            self.b.ins().brif(go, start, &[], exit, &[]);
            self.b.switch_to_block(start);
            if versioned {
                // Loops with sequential loops inside (sparse rows, reductions over a
                // dimension) do not vectorize; they get a second copy of the loop nest for the
                // usual case of unit innermost strides, where every innermost index scales by
                // a constant (a shift, folded into the address) and no stride occupies a
                // register.
                let general = self.views.clone();
                let unit = self.assume_unit_inner()?;
                // A third copy where, besides, every origin the body reads is zero (a
                // launch of one piece: a CSR row's columns and bounds then index `x`,
                // `crd` and `vals` directly, and two registers are free).
                let origins = origins_read(&pl.body);
                if !origins.is_empty() {
                    let mut zero = unit;
                    for (param, dim) in origins {
                        let (_, slot) = self.layout.store(param)?;
                        if dim >= slot.rank {
                            return Err(format!(
                                "dimension {dim} of store parameter {param}, which has rank {}",
                                slot.rank
                            ));
                        }
                        let o = self.frame_word(types::I64, slot.origin(dim));
                        let ok = self.b.ins().icmp_imm_s(IntCC::Equal, o, 0);
                        zero = self.b.ins().band(zero, ok);
                    }
                    let (at_zero, other) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(zero, at_zero, &[], other, &[]);
                    self.b.switch_to_block(at_zero);
                    self.zero_origins = true;
                    let nest = if grouped {
                        self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)
                    } else {
                        self.jammed_nest(pl, pos, lo, hi, &over_ext, exit)
                    };
                    self.zero_origins = false;
                    nest?;
                    self.b.switch_to_block(other);
                }
                let (fast, slow) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(unit, fast, &[], slow, &[]);
                self.b.switch_to_block(fast);
                if grouped {
                    self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)?;
                } else {
                    self.jammed_nest(pl, pos, lo, hi, &over_ext, exit)?;
                }
                self.views = general;
                self.b.switch_to_block(slow);
            }
            if grouped {
                self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)?;
            } else {
                self.loop_nest(pl, lo, hi, &over_ext, exit)?;
            }
        }
        self.b.switch_to_block(exit);
        self.parallel_exit(&reds, &HashMap::new())?;
        let mut kind = self.parallel_step(over, reds);
        if let StepKind::Parallel { grouped: g, .. } = &mut kind {
            *g = grouped;
        }
        Ok(kind)
    }

    /// Makes every store view's innermost stride the constant element size (`unit_inner`),
    /// for a copy of the code that runs only when that holds, and returns the test that it
    /// does (one `i8`, true when every view's innermost stride is its element size).
    fn assume_unit_inner(&mut self) -> LResult<Value> {
        let mut unit = self.b.ins().iconst(types::I8, 1);
        let mut params: Vec<u32> = self.views.keys().copied().collect();
        params.sort_unstable();
        for param in params {
            let (_, slot) = self.layout.store(param)?;
            let size = i64::try_from(slot.dtype.size()).map_err(|e| e.to_string())?;
            let Some(view) = self.views.get_mut(&param) else {
                continue;
            };
            let Some(inner) = view.stride.last_mut() else {
                continue;
            };
            let ok = self.b.ins().icmp_imm_s(IntCC::Equal, *inner, size);
            unit = self.b.ins().band(unit, ok);
            *inner = self.b.ins().iconst(types::I64, size);
            view.unit_inner = true;
        }
        Ok(unit)
    }

    /// The step a parallel loop over top-level loop `over` compiled to, with the bounds
    /// obligations its lowering collected and its reduction buffers.
    pub(crate) fn parallel_step(&mut self, over: usize, reds: Vec<RedBuf>) -> StepKind {
        let obligations = self
            .par
            .take()
            .map(|p| p.obligations.into_iter().collect())
            .unwrap_or_default();
        StepKind::Parallel {
            over,
            obligations,
            reds,
            spread: false,
            grouped: false,
        }
    }

    /// Whether a parallel step over rows `lo..hi` runs at all: some rows, and every inner
    /// extent (`over_ext[1..]`) positive.
    pub(crate) fn rows_guard(&mut self, lo: Value, hi: Value, over_ext: &[Value]) -> Value {
        let mut go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        for &e in over_ext.get(1..).unwrap_or_default() {
            let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, e, 0);
            go = self.b.ins().band(go, pos);
        }
        go
    }

    /// The loop nest of a parallel step with rank at least 1 over rows `lo..hi` (at least one,
    /// every inner extent positive), from the current block, leaving to `exit`.
    pub(super) fn loop_nest(
        &mut self,
        pl: &ParallelLoop,
        lo: Value,
        hi: Value,
        over_ext: &[Value],
        exit: Block,
    ) -> LResult<()> {
        let heads = self.loop_heads(over_ext.len());
        self.b.ins().jump(heads[0], &[BlockArg::Value(lo)]);
        let mark = self.env.mark();
        self.enter_loop_heads(pl, &heads, None);
        self.lower_body(&pl.body)?;
        self.loop_latches(&heads, hi, over_ext, exit, None);
        self.env.pop_to(mark);
        Ok(())
    }

    /// One loop head block per dimension of a loop nest, each with its index as parameter.
    pub(crate) fn loop_heads(&mut self, dims: usize) -> Vec<Block> {
        (0..dims)
            .map(|_| {
                let blk = self.b.create_block();
                self.b.append_block_param(blk, types::I64);
                blk
            })
            .collect()
    }

    /// Fills the loop heads of `pl`'s first `heads.len()` dimensions: each defines its index
    /// and enters the next dimension at 0. The innermost head jumps to `inner` if given, or
    /// stays current for the body.
    pub(crate) fn enter_loop_heads(
        &mut self,
        pl: &ParallelLoop,
        heads: &[Block],
        inner: Option<Block>,
    ) {
        for (d, &head) in heads.iter().enumerate() {
            self.b.switch_to_block(head);
            let i = self.b.block_params(head)[0];
            self.env.define(pl.indices[d], i, DType::I64);
            if let Some(&next) = heads.get(d + 1) {
                let zero = self.b.ins().iconst(types::I64, 0);
                self.b.ins().jump(next, &[BlockArg::Value(zero)]);
            } else if let Some(inner) = inner {
                self.b.ins().jump(inner, &[]);
            }
        }
    }

    /// The latches of a loop nest, innermost first, from the current block: dimension 0 runs
    /// to `hi`, dimension `d > 0` to `over_ext[d]`; the nest leaves to `exit`. The innermost
    /// dimension's next index is `inner_next` where given (computed where it dominates the
    /// latch), else its index plus one.
    pub(crate) fn loop_latches(
        &mut self,
        heads: &[Block],
        hi: Value,
        over_ext: &[Value],
        exit: Block,
        inner_next: Option<Value>,
    ) {
        for (d, &head) in heads.iter().enumerate().rev() {
            let i = self.b.block_params(head)[0];
            let next = match inner_next {
                Some(next) if d + 1 == heads.len() => next,
                _ => self.b.ins().iadd_imm_s(i, 1),
            };
            let limit = if d == 0 { hi } else { over_ext[d] };
            let more = self.b.ins().icmp(IntCC::SignedLessThan, next, limit);
            let out = if d == 0 { exit } else { self.b.create_block() };
            self.b
                .ins()
                .brif(more, head, &[BlockArg::Value(next)], out, &[]);
            if d > 0 {
                self.b.switch_to_block(out);
            }
        }
    }
}

/// The `(param, dim)` of every `origin` that `body` reads, nested loops included, each once.
fn origins_read(body: &[Inst]) -> BTreeSet<(u32, usize)> {
    fn walk(body: &[Inst], found: &mut BTreeSet<(u32, usize)>) {
        for inst in body {
            match &inst.op {
                Op::Origin { param, dim } => {
                    found.insert((*param, *dim as usize));
                }
                Op::Parallel(p) => walk(&p.body, found),
                Op::For(l) => walk(&l.body, found),
                _ => {}
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(body, &mut found);
    found
}

/// Whether `body` has a sequential loop, at any depth.
pub(super) fn has_for_loop(body: &[Inst]) -> bool {
    body.iter().any(|inst| match &inst.op {
        Op::For(_) => true,
        Op::Parallel(p) => has_for_loop(&p.body),
        _ => false,
    })
}
