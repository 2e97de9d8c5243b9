//! The emission of a lane loop: the loop as vectors of lanes ([`FnLower::lower_for_lanes`]),
//! its wide body defined in the module and called, its bounds checks and gathers.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    BlockArg, ConstantData, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_module::Module;
use weft_ir::{DType, ForLoop, Inst, ValueId};

use super::{FoldCall, LanePlan, MIN_STEPS, Node, Site};
use crate::lower::vector::vec_type;
use crate::lower::wide::{FoldBody, FoldWord, UNROLL};
use crate::lower::{FaultSite, FnLower, LResult, cl_type, data_flags};

impl FnLower<'_, '_> {
    /// Defines the machine code of `body`, compiled from `plan`, as a function of the module
    /// (signature `fn(args: *const u64, steps: i64)`) and keeps its constant table.
    pub(in crate::lower) fn define_fold(
        &mut self,
        body: FoldBody,
        plan: &LanePlan,
    ) -> LResult<FoldCall> {
        let what = format!("the {} lane body", body.isa.name());
        let func =
            crate::lower::define::define_wide_code(self.module, self.ptr_ty, &body.code, &what)?;
        self.loop_counts.code_bytes += body.code.len();
        self.tables.push(body.table);
        Ok(FoldCall {
            func,
            args: body.args,
            stride: body.stride,
            sites: plan.sites.clone(),
            gathers: body.gathers,
            scalar: plan.scalar.clone(),
        })
    }

    /// Runs the first iterations of `l` (from `lo`, below `hi`, the carried vectors `init`)
    /// in the wide body `w`, as many whole steps as there are (at most 2^22, at least
    /// [`MIN_STEPS`]), where every site of the last of them is in bounds; returns the
    /// iteration to go on from and the carried vectors there. The first iteration's scalar
    /// code and checks run before the call, as the loop's would: a fault stops the kernel
    /// where the loop would stop it. If a later iteration's site or a gathered row's other
    /// indices would fault, the loop runs every iteration and faults where it must; a gathered
    /// index out of range stops the body before its step, and the loop goes on from there.
    fn call_fold(
        &mut self,
        l: &ForLoop,
        plan: &LanePlan,
        w: &FoldCall,
        (lo, hi): (Value, Value),
        init: &[Value],
    ) -> LResult<(Value, Vec<Value>)> {
        let lanes = plan.lanes;
        let join = self.b.create_block();
        self.b.append_block_param(join, types::I64);
        for &t in &plan.groups {
            self.b.append_block_param(join, vec_type(t, lanes));
        }
        let skip: Vec<BlockArg> = std::iter::once(lo)
            .chain(init.iter().copied())
            .map(BlockArg::Value)
            .collect();
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let diff = self.b.ins().isub(hi, lo);
        let zero = self.b.ins().iconst(types::I64, 0);
        let n = self.b.ins().select(go, diff, zero);
        // `hi - lo`, taken unsigned, is the iteration count when `lo < hi`.
        let steps = self.b.ins().udiv_imm_u(n, UNROLL);
        // At most `2^22` steps per call (the rest run in the 128-bit loop, which checks the
        // cancel flag on every back edge): a call stays well under a second.
        let cap = self.b.ins().iconst(types::I64, 1 << 22);
        let steps = self.b.ins().umin(steps, cap);
        // Short loops stay in the 128-bit code: the call costs more than it saves.
        let enough = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, steps, MIN_STEPS);
        let prologue = self.b.create_block();
        self.b.ins().brif(enough, prologue, &[], join, &skip);

        self.b.switch_to_block(prologue);
        let mark = self.env.mark();
        self.env.define(l.induction, lo, DType::I64);
        for (inst, &scalar) in l.body.iter().zip(&w.scalar) {
            if scalar {
                self.lower_inst(inst)?;
            }
        }
        let addrs = self.site_addresses(&w.sites)?;
        // The last iteration's sites: `stride (S - 1)` elements further than the first's.
        let count = self.b.ins().imul_imm_s(steps, UNROLL);
        let last = self.b.ins().iadd_imm_s(count, -1);
        let extra = self.b.ins().imul_imm_s(last, w.stride);
        let mut ok = None;
        for site in &w.sites {
            let (_, slot) = self.layout.store(site.param)?;
            let ext = *self
                .views
                .get(&site.param)
                .and_then(|v| v.ext.get(slot.rank.wrapping_sub(1)))
                .ok_or_else(|| format!("internal: store parameter {} not loaded", site.param))?;
            let base = match site.base {
                Some(b) => self.typed(b, DType::I64, "index")?,
                None => self.b.ins().iconst(types::I64, 0),
            };
            // The first iteration's check proved `base + max < ext`.
            let high = self.b.ins().iadd_imm_s(base, site.max);
            let room = self.b.ins().isub(ext, high);
            let fits = self.b.ins().icmp(IntCC::SignedLessThan, extra, room);
            ok = Some(match ok {
                None => fits,
                Some(o) => self.b.ins().band(o, fits),
            });
        }
        let mut ok = ok.ok_or("internal: a wide lane body without sites")?;
        // Each gathered row: its address and bound. Its other indices are the same in every
        // iteration; if one is out of range the loop runs every iteration and faults there.
        let mut rows = Vec::with_capacity(w.gathers.len());
        for (param, outer) in &w.gathers {
            let (store, slot) = self.layout.store(*param)?;
            let view = self
                .views
                .get(param)
                .ok_or_else(|| format!("internal: store parameter {param} not loaded"))?;
            let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
            let mut checks = Vec::new();
            let offset = self.index_offset((*param, store), outer, (&ext, &stride), &mut checks)?;
            for (i, e, _) in checks {
                let fits = self.b.ins().icmp(IntCC::UnsignedLessThan, i, e);
                ok = self.b.ins().band(ok, fits);
            }
            let row = match offset {
                None => base_ptr,
                Some(o) => self.b.ins().iadd(base_ptr, o),
            };
            let n = *ext
                .get(slot.rank.wrapping_sub(1))
                .ok_or("internal: a gather from a store of rank 0")?;
            rows.push((row, n));
        }
        let call = self.b.create_block();
        self.b.ins().brif(ok, call, &[], join, &skip);

        self.b.switch_to_block(call);
        let words = u32::try_from((w.args.len() + 1) * 8).map_err(|e| e.to_string())?;
        let args = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            words,
            3,
        ));
        let vector_bytes = u32::from(lanes) * 8;
        let carried_bytes = u32::try_from(plan.groups.len())
            .ok()
            .and_then(|g| g.checked_mul(16))
            .ok_or("internal: too many carried values")?;
        let carried = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            carried_bytes,
            4,
        ));
        for (k, word) in w.args.iter().enumerate() {
            let x = match *word {
                FoldWord::Site(i) => *addrs.get(i).ok_or("internal: no such site")?,
                FoldWord::GatherRow(g) => rows.get(g).ok_or("internal: no such gather")?.0,
                FoldWord::Bound { gather, less_one } => {
                    let n = rows.get(gather).ok_or("internal: no such gather")?.1;
                    if less_one {
                        self.b.ins().iadd_imm_s(n, -1)
                    } else {
                        n
                    }
                }
                FoldWord::Uniform(v) => {
                    let (x, t) = self.val(v)?;
                    match t {
                        DType::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), x),
                        DType::I64 => x,
                        // All ones for true, zero for false: a mask in every lane.
                        DType::Bool => {
                            let w = self.b.ins().uextend(types::I64, x);
                            self.b.ins().ineg(w)
                        }
                        _ => return Err(format!("internal: a uniform {t} for a wide body")),
                    }
                }
            };
            let offset = i32::try_from(k * 8).map_err(|e| e.to_string())?;
            self.b.ins().stack_store(self.ptr_ty, x, args, offset);
        }
        let at = self.b.ins().stack_addr(self.ptr_ty, carried, 0);
        let offset = i32::try_from(w.args.len() * 8).map_err(|e| e.to_string())?;
        self.b.ins().stack_store(self.ptr_ty, at, args, offset);
        for (g, &v) in init.iter().enumerate() {
            let offset = i32::try_from(g as u32 * vector_bytes).map_err(|e| e.to_string())?;
            self.b.ins().stack_store(self.ptr_ty, v, carried, offset);
        }
        let args_at = self.b.ins().stack_addr(self.ptr_ty, args, 0);
        let callee = self.module.declare_func_in_func(w.func, self.b.func);
        // The body's bytes may land anywhere in the address space, further than a 32-bit
        // displacement reaches from the caller: call it through its absolute address.
        self.b.func.dfg.ext_funcs[callee].colocated = false;
        let call = self.b.ins().call(callee, &[args_at, steps]);
        // The steps it left to the loop: a gathered index out of range stopped it there.
        let left = self.b.inst_results(call)[0];
        let ran = self.b.ins().isub(steps, left);
        let ran = self.b.ins().imul_imm_s(ran, UNROLL);
        let mut back = vec![BlockArg::Value(self.b.ins().iadd(lo, ran))];
        for (g, &t) in plan.groups.iter().enumerate() {
            let offset = i32::try_from(g as u32 * vector_bytes).map_err(|e| e.to_string())?;
            let v = self
                .b
                .ins()
                .stack_load(self.ptr_ty, vec_type(t, lanes), carried, offset);
            back.push(BlockArg::Value(v));
        }
        self.b.ins().jump(join, &back);
        self.env.pop_to(mark);

        self.b.switch_to_block(join);
        let params = self.b.block_params(join).to_vec();
        Ok((params[0], params[1..].to_vec()))
    }

    /// The `for` loop `l` (instruction `inst`) as vectors of lanes, by `plan`, its bulk in the
    /// wide body `wide` if there is one.
    pub(in crate::lower) fn lower_for_lanes(
        &mut self,
        inst: &Inst,
        l: &ForLoop,
        plan: &LanePlan,
        wide: Option<&FoldCall>,
    ) -> LResult<()> {
        let lanes = plan.lanes;
        let w = usize::from(lanes);
        let lo = self.typed(l.lo, DType::I64, "loop bound")?;
        let hi = self.typed(l.hi, DType::I64, "loop bound")?;
        let mut init = Vec::with_capacity(plan.groups.len());
        for (g, &t) in plan.groups.iter().enumerate() {
            let first = self.typed(l.init[g * w], t, "initial value")?;
            let mut v = self.b.ins().splat(vec_type(t, lanes), first);
            for lane in 1..lanes {
                let x = self.typed(l.init[g * w + usize::from(lane)], t, "initial value")?;
                v = self.b.ins().insertlane(v, x, lane);
            }
            init.push(v);
        }
        let (lo, init) = match wide {
            Some(w) => self.call_fold(l, plan, w, (lo, hi), &init)?,
            None => (lo, init),
        };
        let body = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(body, types::I64);
        for &t in &plan.groups {
            self.b.append_block_param(body, vec_type(t, lanes));
            self.b.append_block_param(exit, vec_type(t, lanes));
        }
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let mut body_args = vec![BlockArg::Value(lo)];
        body_args.extend(init.iter().map(|&v| BlockArg::Value(v)));
        let exit_args: Vec<BlockArg> = init.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(go, body, &body_args, exit, &exit_args);

        self.b.switch_to_block(body);
        let params = self.b.block_params(body).to_vec();
        let mark = self.env.mark();
        self.env.define(l.induction, params[0], DType::I64);
        for (inst, &scalar) in l.body.iter().zip(&plan.scalar) {
            if scalar {
                self.lower_inst(inst)?;
            }
        }
        let addrs = self.site_addresses(&plan.sites)?;
        let mut vals: Vec<Value> = Vec::with_capacity(plan.nodes.len());
        for node in &plan.nodes {
            let v = match *node {
                Node::Splat(v, t) => {
                    let x = self.typed(v, t, "lane operand")?;
                    self.splat(x, t, lanes)
                }
                Node::Consts(t, ref cs) => {
                    let mut bytes = Vec::with_capacity(16);
                    for c in cs {
                        let bits = c.to_bits().to_le_bytes();
                        bytes.extend_from_slice(&bits[..t.size()]);
                    }
                    let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
                    self.b.ins().vconst(vec_type(t, lanes), c)
                }
                Node::Carried(g) => params[1 + g],
                Node::Binary(op, t, x, y) => self.vbinary(op, t, vals[x], vals[y], lanes)?,
                Node::Unary(op, t, x) => self.vunary(op, t, vals[x])?,
                // One rounding per lane, as the scalar `fma`: the FMA instruction where the
                // CPU has it, else Cranelift's call to `fma`/`fmaf` per lane.
                Node::Fma(_, x, y, z) => self.b.ins().fma(vals[x], vals[y], vals[z]),
                Node::Cast(from, to, x) => self.vcast(vals[x], from, to, lanes)?,
                Node::Load {
                    site,
                    offset,
                    dtype,
                } => {
                    let size = i64::try_from(dtype.size()).map_err(|e| e.to_string())?;
                    let off = i32::try_from(offset * size).map_err(|e| e.to_string())?;
                    self.b
                        .ins()
                        .load(vec_type(dtype, lanes), data_flags(), addrs[site], off)
                }
                Node::LoadWidened { site, offset } => {
                    if lanes != 2 {
                        return Err(format!("internal: a widened load of {lanes} lanes"));
                    }
                    let off = i32::try_from(offset * 4).map_err(|e| e.to_string())?;
                    self.b.ins().sload32x2(data_flags(), addrs[site], off)
                }
                Node::Gather {
                    param,
                    ref outer,
                    indices,
                    dtype,
                } => self.gather(param, outer, vals[indices], dtype, lanes)?,
            };
            vals.push(v);
        }
        let ys: Vec<Value> = plan.roots.iter().map(|&r| vals[r]).collect();
        self.env.pop_to(mark);
        if !crate::lower::loops::bounded_by_a_store(l) {
            self.check_cancel()?;
        }
        let next = self.b.ins().iadd_imm_s(params[0], 1);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        let mut back = vec![BlockArg::Value(next)];
        back.extend(ys.iter().map(|&v| BlockArg::Value(v)));
        let out: Vec<BlockArg> = ys.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(more, body, &back, exit, &out);

        self.b.switch_to_block(exit);
        let results = self.b.block_params(exit).to_vec();
        for (g, &t) in plan.groups.iter().enumerate() {
            for lane in 0..lanes {
                let k = g * w + usize::from(lane);
                let x = self.lane(results[g], lane, t);
                self.env.define(inst.results[k], x, t);
            }
        }
        Ok(())
    }

    /// Lane `l` of the result: element `indices[l]` of the last dimension of store parameter
    /// `param` (its other dimensions at `outer`). Every lane's index is checked, after the
    /// outer ones, before any lane loads; a failure names the last dimension, as the scalar
    /// code's first failing load of the store would.
    fn gather(
        &mut self,
        param: u32,
        outer: &[ValueId],
        indices: Value,
        dtype: DType,
        lanes: u8,
    ) -> LResult<Value> {
        let (store, slot) = self.layout.store(param)?;
        let view = self
            .views
            .get(&param)
            .ok_or_else(|| format!("internal: store parameter {param} not loaded"))?;
        let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
        let mut checks = Vec::new();
        let offset = self.index_offset((param, store), outer, (&ext, &stride), &mut checks)?;
        let last = slot.rank - 1;
        let code = self.faults.code(FaultSite {
            param,
            dim: last as u32,
        });
        let idx: Vec<Value> = (0..lanes)
            .map(|l| self.b.ins().extractlane(indices, l))
            .collect();
        for &i in &idx {
            checks.push((i, ext[last], code));
        }
        let cont = self.b.create_block();
        self.check_or_fault(checks, cont, &[]);
        self.b.switch_to_block(cont);
        let row = match offset {
            None => base_ptr,
            Some(o) => self.b.ins().iadd(base_ptr, o),
        };
        let mut v = None;
        for (l, &i) in idx.iter().enumerate() {
            let at = self.b.ins().imul(i, stride[last]);
            let at = self.b.ins().iadd(row, at);
            let x = self.b.ins().load(cl_type(dtype), data_flags(), at, 0);
            v = Some(match v {
                None => self.b.ins().scalar_to_vector(vec_type(dtype, lanes), x),
                Some(v) => {
                    let lane = u8::try_from(l).map_err(|e| e.to_string())?;
                    self.b.ins().insertlane(v, x, lane)
                }
            });
        }
        v.ok_or_else(|| "internal: a gather of no lanes".into())
    }

    /// Checks every site's indices for this iteration and returns the address of each
    /// site's element at `base` (offset 0 of its last dimension).
    fn site_addresses(&mut self, sites: &[Site]) -> LResult<Vec<Value>> {
        let mut checks = Vec::new();
        let mut addrs = Vec::with_capacity(sites.len());
        // Checks first, in site order; addresses after, once every check passed.
        let mut parts = Vec::with_capacity(sites.len());
        for site in sites {
            let (store, slot) = self.layout.store(site.param)?;
            let (dtype, rank) = (slot.dtype, slot.rank);
            let view = self
                .views
                .get(&site.param)
                .ok_or_else(|| format!("internal: store parameter {} not loaded", site.param))?;
            let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
            let offset = self.index_offset(
                (site.param, store),
                &site.outer,
                (&ext, &stride),
                &mut checks,
            )?;
            let last = rank - 1;
            let base = match site.base {
                Some(b) => self.typed(b, DType::I64, "index")?,
                None => self.b.ins().iconst(types::I64, 0),
            };
            let code = self.faults.code(FaultSite {
                param: site.param,
                dim: last as u32,
            });
            // `low..=low + span` lies in `0..ext` exactly when `low`, taken unsigned, is below
            // `max(ext - span, 0)`: one comparison per site.
            let low = self.b.ins().iadd_imm_s(base, site.min);
            let span = site
                .max
                .checked_sub(site.min)
                .ok_or("a site's span overflows")?;
            let room = self.b.ins().iadd_imm_s(ext[last], -span);
            let zero = self.b.ins().iconst(types::I64, 0);
            let limit = self.b.ins().smax(room, zero);
            checks.push((low, limit, code));
            parts.push((base_ptr, offset, base, dtype));
        }
        if !checks.is_empty() {
            let cont = self.b.create_block();
            self.check_or_fault(checks, cont, &[]);
            self.b.switch_to_block(cont);
        }
        for (base_ptr, offset, base, dtype) in parts {
            // The last stride is one element (the plan requires it).
            let shift = i64::from(dtype.size().trailing_zeros());
            let last = self.b.ins().ishl_imm_u(base, shift);
            let off = match offset {
                None => last,
                Some(o) => self.b.ins().iadd(o, last),
            };
            addrs.push(self.b.ins().iadd(base_ptr, off));
        }
        Ok(addrs)
    }
}
