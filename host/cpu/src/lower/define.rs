//! One step's function defined in the module: a parallel loop's vector or scalar function
//! and its wide body ([`StepCx::lower_loop`]), any function built by a closure
//! ([`StepCx::define`]), and the stack limit of compiled code ([`MAX_FRAME_BYTES`]).

use std::collections::{HashMap, HashSet};

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{self, AbiParam, Type, Value, types};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module, ModuleReloc};
use weft_ir::{Op, ParallelLoop, ReduceOp, ValueId};

use super::kernel::{Step, StepKind};
use super::points::grouped_stores;
use super::reduce::RedMode;
use super::skeleton::has_for_loop;
use super::{Env, FnLower, LResult, StepCx, prefetch, vector, wide};

/// Defines machine code of our own (a wide body, see [`wide`]) as a function of `module`
/// with the signature `fn(args: *const u64, steps: i64) -> i64`; `what` names it in errors.
pub(super) fn define_wide_code(
    module: &mut JITModule,
    ptr_ty: Type,
    code: &[u8],
    what: &str,
) -> LResult<FuncId> {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let func = module
        .declare_anonymous_function(&sig)
        .map_err(|e| format!("declare: {e}"))?;
    module
        .define_function_bytes(func, 64, code, &[])
        .map_err(|e| format!("define {what}: {e:?}"))?;
    Ok(func)
}

/// The most stack one compiled function's frame may take. Worker threads have stacks of
/// [`crate::WORKER_STACK_BYTES`], so a kernel never runs out of stack, and Cranelift's inline
/// probes touch every page of a larger-than-a-page frame on the way down.
pub const MAX_FRAME_BYTES: u32 = 256 << 10;

/// Refuses the function just compiled in `ctx` when its frame is larger than
/// [`MAX_FRAME_BYTES`] (a kernel with very many values live at once).
fn check_frame(ctx: &Context) -> LResult<()> {
    let frame = ctx
        .compiled_code()
        .and_then(|c| c.buffer.frame_layout())
        .map_or(0, |f| f.frame_to_fp_offset);
    if frame > MAX_FRAME_BYTES {
        return Err(format!(
            "its frame needs {frame} bytes of stack, more than the limit of {MAX_FRAME_BYTES} \
             (too many values live at once)"
        ));
    }
    Ok(())
}

/// A wide body defined in the module, and what its caller passes it.
pub(crate) struct WideCall {
    pub isa: wide::Isa,
    pub func: FuncId,
    pub args: Vec<wide::ArgWord>,
    /// Whether it leaves its loop's grouped leaf stores grouped (see [`wide::compile`]).
    pub grouped: bool,
    /// Where it runs whole rows, its lane masks' address (see [`wide::WideBody::masks`]).
    pub masks: Option<u64>,
}

impl StepCx<'_> {
    /// Compiles the top-level parallel loop `pl` at position `pos` into one step: the vector
    /// function where the loop vectorizes (it runs the scalar body for remainders and for
    /// strides it cannot take as vectors), else a scalar one.
    pub(super) fn lower_loop(
        &mut self,
        pl: &ParallelLoop,
        pos: usize,
        simd: Option<vector::Features>,
        vector_isa: &dyn TargetIsa,
    ) -> LResult<Step> {
        // A loop that vectorizes gets one function, the vector one (it runs the scalar body
        // for remainders and for strides it cannot take as vectors); any other, a scalar one.
        let plan = simd.and_then(|f| vector::analyze(pl, self.layout, self.types, f).ok());
        // Its bulk in a wide body, where the path has one and the body qualifies.
        let wide = match (&plan, simd.and_then(|f| f.wide)) {
            (Some(p), Some(isa)) => {
                let const_of = |v: ValueId| {
                    let def = pl
                        .body
                        .iter()
                        .find(|i| i.results.first() == Some(&v))
                        .or_else(|| self.top.defs.get(&v).map(|d| d.1))?;
                    match def.op {
                        Op::Const(c) => Some(c),
                        _ => None,
                    }
                };
                let grouped = if self.whole {
                    grouped_stores(pl, self.grouped)
                } else {
                    Vec::new()
                };
                Some(
                    wide::compile(isa, pl, p, self.types, &const_of, &grouped)
                        .map(|w| (w, !grouped.is_empty())),
                )
            }
            _ => None,
        };
        let (wide, wide_refusal) = match wide {
            Some(Ok((w, grouped))) => (Some(self.define_wide(w, grouped)?), None),
            Some(Err(why)) => (None, Some(why)),
            None => (None, None),
        };
        let mut kind = StepKind::Sequential;
        let (func, vectorized) = match plan {
            Some(plan) => {
                let func = self.define(Some(vector_isa), &mut |fl| {
                    kind = fl.build_vector(pl, pos, &plan, wide.as_ref())?;
                    Ok(())
                })?;
                (func, true)
            }
            None => {
                let func = self.define(None, &mut |fl| {
                    kind = fl.build_parallel(pl, pos)?;
                    Ok(())
                })?;
                (func, false)
            }
        };
        if let StepKind::Parallel { reds, spread, .. } = &mut kind {
            let ordered = reds.iter().any(|r| {
                r.mode == RedMode::Buffer
                    && matches!(r.op, ReduceOp::Sum | ReduceOp::Prod)
                    && self.layout.stores[r.store].dtype.is_float()
            });
            *spread = has_for_loop(&pl.body) && !ordered;
        }
        Ok(Step {
            kind,
            func,
            vectorized,
            wide: wide.as_ref().filter(|_| vectorized).map(|w| w.isa),
            wide_refusal,
            whole_rows: vectorized && wide.as_ref().is_some_and(|w| w.masks.is_some()),
        })
    }

    /// Defines the machine code of `body` as a function of the module (signature
    /// `fn(args: *const u64, steps: i64)`) and keeps its constant table.
    fn define_wide(&mut self, body: wide::WideBody, grouped: bool) -> LResult<WideCall> {
        let what = format!("the {} body", body.isa.name());
        let func = define_wide_code(self.module, self.ptr_ty, &body.code, &what)?;
        self.loop_counts.code_bytes += body.code.len();
        self.tables.push(body.table);
        Ok(WideCall {
            isa: body.isa,
            func,
            args: body.args,
            grouped,
            masks: body.masks,
        })
    }

    /// Declares a function, builds its body with `build` and defines it in the module,
    /// compiled by the module's ISA or by `isa`.
    pub(super) fn define(
        &mut self,
        isa: Option<&dyn TargetIsa>,
        build: &mut dyn FnMut(&mut FnLower<'_, '_>) -> LResult<()>,
    ) -> LResult<FuncId> {
        self.module.clear_context(self.ctx);
        self.ctx.func.signature = self.sig.clone();
        let func = self
            .module
            .declare_anonymous_function(self.sig)
            .map_err(|e| format!("declare: {e}"))?;
        self.ctx.func.name = ir::UserFuncName::user(0, func.as_u32());
        let fconfig = self.module.target_config();
        let markers;
        {
            let b = FunctionBuilder::new(&mut self.ctx.func, self.fctx);
            let mut fl = FnLower {
                b,
                module: self.module,
                math: self.math,
                math_refs: HashMap::new(),
                layout: self.layout,
                top: self.top,
                env: Env::default(),
                views: HashMap::new(),
                frame: Value::from_u32(0),
                red: Value::from_u32(0),
                ptr_ty: self.ptr_ty,
                pending: Vec::new(),
                faults: self.faults,
                spill_types: self.spill_types,
                par: None,
                tables: self.tables,
                for_proven: HashSet::new(),
                types: self.types,
                lanes: self.lanes,
                consts: HashMap::new(),
                in_for: 0,
                zero_origins: false,
                loop_counts: self.loop_counts,
                widened: HashMap::new(),
                cancel_flag: self.cancel_flag,
                addresses: HashMap::new(),
                jams: self.jams,
                in_jam: false,
                grouped: if self.whole { self.grouped } else { &[] },
                captured: None,
                prefetch: self.prefetch,
                markers: 0,
            };
            build(&mut fl)?;
            markers = fl.markers;
            // Resets `fctx` for the next function.
            fl.b.finalize(fconfig);
        }
        // As `JITModule::define_function` does, with the markers of prefetches rewritten.
        let isa = isa.unwrap_or_else(|| self.module.isa());
        let mut ctrl = ControlPlane::default();
        self.ctx
            .compile_with_cache(isa, self.function_cache, &mut ctrl)
            .map_err(|e| format!("cranelift: {:?}", e.inner))?;
        let code = self
            .ctx
            .compiled_code()
            .ok_or("internal: no compiled code")?;
        let align = u64::from(code.buffer.alignment);
        let relocs: Vec<ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| ModuleReloc::from_mach_reloc(r, &self.ctx.func, func))
            .collect();
        let mut bytes = code.buffer.data().to_vec();
        // Cranelift drops the markers of blocks it proves unreachable (a loop whose constant
        // bounds leave it empty), so fewer may be found than were lowered; never more.
        let patched = prefetch::patch(&mut bytes, code.buffer.traps())?;
        if patched > markers {
            return Err(format!(
                "internal: {markers} prefetch markers lowered, {patched} found in the code"
            ));
        }
        check_frame(self.ctx)?;
        self.module
            .define_function_bytes(func, align, &bytes, &relocs)
            .map_err(|e| format!("cranelift: {e:?}"))?;
        self.loop_counts.code_bytes += bytes.len();
        Ok(func)
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;
    use cranelift_codegen::ir::{Function, InstBuilder, Signature, StackSlotData, StackSlotKind};
    use cranelift_codegen::isa::CallConv;
    use cranelift_frontend::FunctionBuilderContext;

    /// Compiles a function whose frame holds a stack slot of `bytes`, and checks its frame.
    fn frame_of(bytes: u32) -> LResult<()> {
        let isa = crate::compile::native_isa("speed").expect("isa");
        let mut sig = Signature::new(CallConv::SystemV);
        sig.returns.push(AbiParam::new(types::I64));
        let mut ctx = Context::for_function(Function::with_name_signature(
            ir::UserFuncName::user(0, 0),
            sig,
        ));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let slot =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 3));
        let entry = b.create_block();
        b.switch_to_block(entry);
        let x = b.ins().iconst(types::I64, 7);
        b.ins().stack_store(types::I64, x, slot, 0);
        let y = b.ins().stack_load(types::I64, types::I64, slot, 0);
        b.ins().return_(&[y]);
        b.seal_all_blocks();
        b.finalize(isa.frontend_config());
        ctx.compile(&*isa, &mut ControlPlane::default())
            .expect("compiles");
        check_frame(&ctx)
    }

    #[test]
    fn a_frame_past_the_bound_is_refused() {
        frame_of(1024).expect("a small frame is fine");
        frame_of(MAX_FRAME_BYTES / 2).expect("half the bound is fine");
        let err = frame_of(MAX_FRAME_BYTES + 4096).expect_err("refused");
        assert!(err.contains("bytes of stack, more than the limit"), "{err}");
    }
}
