//! Loads and stores: the address of an element, the bounds check of each index that is not
//! proven in bounds (proven by an enclosing `for` loop's range check, or left to the
//! launcher as an [`Obligation`]), and the cold fault blocks that name the failing
//! [`FaultSite`].

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value, types};
use weft_ir::{Access, DType, Inst, Scalar, ValueId};

use super::{FnLower, LResult, cl_type, data_flags};

/// A run-time condition that a parallel step's unchecked accesses rely on: the loop's extent on
/// `loop_dim` is at most the extent of `store` on `dim`; or, with `index`, that constant index
/// is below that extent (an access every point makes, checked once per launch of a loop that
/// has points).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Obligation {
    pub loop_dim: usize,
    /// Index into [`Layout::stores`](super::Layout::stores).
    pub store: usize,
    pub dim: usize,
    pub index: Option<i64>,
}

/// A place where compiled code can stop: an index out of bounds in `param` on `dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FaultSite {
    /// Index in `Kernel::params`.
    pub param: u32,
    pub dim: u32,
}

/// The kernel's fault sites, deduplicated.
#[derive(Default)]
pub(super) struct Faults {
    pub(super) sites: Vec<FaultSite>,
    index: HashMap<FaultSite, usize>,
}

impl Faults {
    /// The status code a function returns for `site`.
    pub(super) fn code(&mut self, site: FaultSite) -> i64 {
        let n = self.sites.len();
        let i = *self.index.entry(site).or_insert(n);
        if i == n {
            self.sites.push(site);
        }
        i as i64 + 1
    }
}

/// A cold block that returns the code of the first out-of-bounds index of one access.
pub(super) struct PendingFail {
    block: Block,
    /// (index, extent, code) per checked dimension.
    checks: Vec<(Value, Value, i64)>,
}

impl FnLower<'_, '_> {
    /// A load of the element `acc` (the result of `inst`).
    pub(super) fn lower_load(&mut self, inst: &Inst, acc: &Access) -> LResult<(Value, DType)> {
        let (_, slot) = self.layout.store(acc.param)?;
        if !slot.privilege.can_read() {
            return Err(format!(
                "load from store parameter {}, which has {:?} privilege",
                acc.param, slot.privilege
            ));
        }
        let dt = slot.dtype;
        let addr = self.address(acc)?;
        if dt.is_unsigned() {
            // An unsigned storage type loads as its `i64` value, zero-extended.
            let ins = self.b.ins();
            let x = match dt {
                DType::U8 => ins.uload8(types::I64, data_flags(), addr, 0),
                DType::U16 => ins.uload16(types::I64, data_flags(), addr, 0),
                DType::U32 => ins.uload32(data_flags(), addr, 0),
                _ => ins.load(types::I64, data_flags(), addr, 0),
            };
            Ok((x, DType::I64))
        } else if dt == DType::I32 {
            let wide = self.b.ins().sload32(data_flags(), addr, 0);
            let x = self.b.ins().ireduce(types::I32, wide);
            if let [r] = inst.results[..] {
                self.widened.insert(r, (x, wide));
            }
            Ok((x, dt))
        } else {
            let x = self.b.ins().load(cl_type(dt), data_flags(), addr, 0);
            let x = if dt == DType::Bool {
                // Any nonzero byte reads as true.
                self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
            } else {
                x
            };
            Ok((x, dt))
        }
    }

    /// A store of `v` into the element `acc`, or, while a group of points is lowered, its
    /// capture (see [`FnLower::grouped_nest`]).
    pub(super) fn lower_store(&mut self, acc: &Access, v: ValueId) -> LResult<()> {
        let (_, slot) = self.layout.store(acc.param)?;
        if !slot.privilege.can_write() {
            return Err(format!(
                "store to store parameter {}, which has {:?} privilege",
                acc.param, slot.privilege
            ));
        }
        let dtype = slot.dtype;
        let x = self.typed(v, dtype.value_type(), "stored value")?;
        if let Some(caught) = &mut self.captured
            && let Some((_, vals)) = caught.iter_mut().find(|(p, _)| *p == acc.param)
        {
            vals.push(x);
            return Ok(());
        }
        let addr = self.address(acc)?;
        let ins = self.b.ins();
        // An unsigned storage type keeps the low bits of its width.
        match dtype {
            DType::U8 => ins.istore8(data_flags(), x, addr, 0),
            DType::U16 => ins.istore16(data_flags(), x, addr, 0),
            DType::U32 => ins.istore32(data_flags(), x, addr, 0),
            _ => ins.store(data_flags(), x, addr, 0),
        };
        Ok(())
    }

    /// The address of the element `acc`, after checking every index that is not proven in
    /// bounds.
    pub(super) fn address(&mut self, acc: &Access) -> LResult<Value> {
        let (store, slot) = self.layout.store(acc.param)?;
        if acc.indices.len() != slot.rank {
            return Err(format!(
                "access to store parameter {} (rank {}) with {} indices",
                acc.param,
                slot.rank,
                acc.indices.len()
            ));
        }
        let view = self
            .views
            .get(&acc.param)
            .ok_or_else(|| format!("internal: store parameter {} not loaded", acc.param))?;
        let (base, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
        let mut checks = Vec::new();
        let offset = self.index_offset(
            (acc.param, store),
            &acc.indices,
            (&ext, &stride),
            &mut checks,
        )?;
        if !checks.is_empty() {
            let cont = self.b.create_block();
            self.check_or_fault(checks, cont, &[]);
            self.b.switch_to_block(cont);
        }
        Ok(match offset {
            None => base,
            Some(o) => self.b.ins().iadd(base, o),
        })
    }

    /// The byte offset of the element at `indices` on the first dimensions of store parameter
    /// `param` (layout store `store`), whose view has extents and strides `ext` and `stride`
    /// (`None` for no indices); the bounds checks these indices need are added to `checks`.
    pub(super) fn index_offset(
        &mut self,
        (param, store): (u32, usize),
        indices: &[ValueId],
        (ext, stride): (&[Value], &[Value]),
        checks: &mut Vec<(Value, Value, i64)>,
    ) -> LResult<Option<Value>> {
        let mut offset: Option<Value> = None;
        for (d, &iv) in indices.iter().enumerate() {
            let idx = self.typed(iv, DType::I64, "index")?;
            if !self.index_proven(iv, store, param, d) {
                let code = self.faults.code(FaultSite {
                    param,
                    dim: d as u32,
                });
                checks.push((idx, ext[d], code));
            }
            let term = self.b.ins().imul(idx, stride[d]);
            offset = Some(match offset {
                None => term,
                Some(o) => self.b.ins().iadd(o, term),
            });
        }
        Ok(offset)
    }

    /// Whether index `iv` on dimension `d` of store parameter `param` (layout store `store`)
    /// needs no check here: an enclosing `for` loop checked its range, or it is a parallel
    /// loop's own index (the launcher checks those ranges, recorded as an obligation).
    fn index_proven(&mut self, iv: ValueId, store: usize, param: u32, d: usize) -> bool {
        if self.for_proven.contains(&(iv, param, d)) {
            return true;
        }
        let konst = match self.consts.get(&iv) {
            Some(Scalar::I64(c)) if *c >= 0 => Some(*c),
            _ => None,
        };
        let top = self.in_for == 0;
        let Some(p) = &mut self.par else {
            return false;
        };
        if let (Some(c), true) = (konst, top) {
            // A constant index of an access at the top of the point's body, which every point
            // makes: the launcher checks it once.
            p.obligations.insert(Obligation {
                loop_dim: 0,
                store,
                dim: d,
                index: Some(c),
            });
            return true;
        }
        let Some(&loop_dim) = p.loop_dims.get(&iv) else {
            return false;
        };
        p.obligations.insert(Obligation {
            loop_dim,
            store,
            dim: d,
            index: None,
        });
        true
    }

    /// Ends the current block with the bounds checks `checks` (index, extent, fault code): on
    /// to `cont` with `cont_args` if every index is below its extent, else to a cold block
    /// (emitted by [`Self::finish`]) that returns the first failing check's code.
    pub(super) fn check_or_fault(
        &mut self,
        checks: Vec<(Value, Value, i64)>,
        cont: Block,
        cont_args: &[BlockArg],
    ) {
        // One comparison per index: against the least of its extents (the fault block finds
        // which one failed). Extents are loop-invariant, so their minimum leaves the loop.
        let mut by_index: Vec<(Value, Value)> = Vec::new();
        for &(idx, e, _) in &checks {
            match by_index.iter_mut().find(|(i, _)| *i == idx) {
                Some((_, m)) => *m = self.b.ins().umin(*m, e),
                None => by_index.push((idx, e)),
            }
        }
        if by_index.is_empty() {
            self.b.ins().jump(cont, cont_args);
            return;
        }
        // A branch per comparison (a compare and a jump each), all to one cold block.
        let fail = self.b.create_block();
        self.b.set_cold_block(fail);
        let last = by_index.len() - 1;
        for (k, (idx, e)) in by_index.into_iter().enumerate() {
            let bad = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, idx, e);
            if k == last {
                self.b.ins().brif(bad, fail, &[], cont, cont_args);
            } else {
                let next = self.b.create_block();
                self.b.ins().brif(bad, fail, &[], next, &[]);
                self.b.switch_to_block(next);
            }
        }
        self.pending.push(PendingFail {
            block: fail,
            checks,
        });
    }

    /// Emits the pending fault blocks and seals everything.
    pub(super) fn finish(&mut self) {
        for pf in std::mem::take(&mut self.pending) {
            self.b.switch_to_block(pf.block);
            // The code of the first failing dimension.
            let mut code = self.b.ins().iconst(types::I64, pf.checks[0].2);
            for &(idx, ext, c) in pf.checks.iter().rev() {
                let bad = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, idx, ext);
                let cv = self.b.ins().iconst(types::I64, c);
                code = self.b.ins().select(bad, cv, code);
            }
            self.b.ins().return_(&[code]);
        }
        self.b.seal_all_blocks();
    }
}
