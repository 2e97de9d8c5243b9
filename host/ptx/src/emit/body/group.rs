//! A rank-1 loop's leaves combined by its block before they leave the kernel: the first
//! [`GROUP_LEVELS`] levels of the canonical tree, in shared memory.
//!
//! With a leaf per point, a dot product over 4M points wrote 32 MB of leaves that the tree's
//! first pass read back (on an H200: 26 us a pass, beside a 53-112 us kernel). Here each
//! block's [`BLOCK_THREADS`] threads cover an *aligned* run of points of the view's global
//! coordinates: thread `t` of block `b`, in step `k` of the grid-stride loop, runs local
//! point `b 256 + t + k (grid) - (s mod 256)`, `s` being the global coordinate of local
//! point 0 (the sub-store's origin), so a block's first thread sits on a multiple of 256
//! and the loop's exit is the same for the whole block (all its threads reach its
//! barriers). Threads outside the range run no body and contribute nothing.
//!
//! After the body, every thread puts its value in shared memory, and three rounds with a
//! barrier between combine the canonical tree's levels 1-3, 4-6 and 7-8 (one thread per
//! node of the round's top level loads its eight, or four, children and combines them in
//! registers, in the tree's order). A pair combines only when the node it forms lies wholly
//! inside the range, as in the tree's own passes (`tree::block`). A thread then writes its
//! slot to its point's place in the leaf buffer unless a node it is not the first leaf of
//! was formed: exactly the complete aligned nodes of levels up to 8 are left at their first
//! leaf, which is what the tree's passes leave at level 8. The launcher starts the passes at
//! level [`GROUP_LEVELS`] ([`crate::emit::Entry::leaf_level`]), and the bits are the
//! canonical tree's.

use super::{Body, Res, reg_type};
use crate::emit::{BLOCK_THREADS, GROUP_LEVELS, Leaf};
use weft_ir::reduction::exact_identity;
use weft_ir::{ParallelLoop, ReduceOp};

/// Children one thread combines in a round (three levels).
const FAN: u64 = 8;

/// The most leaves a grouped entry combines: each takes 2 KiB of shared memory, and a block's
/// static shared memory stops at 48 KiB. A loop with more writes a leaf per point.
pub const MAX_GROUPED_LEAVES: usize = 16;

impl Body<'_> {
    /// The grouped loop of a rank-1 entry with leaves (see the module documentation).
    pub(super) fn grouped_points(
        &mut self,
        lp: &ParallelLoop,
        leaves: &[Leaf],
        extents: &[String],
    ) -> Res {
        let block = u64::from(BLOCK_THREADS);
        debug_assert_eq!(1u64 << GROUP_LEVELS, block);
        let n = extents
            .first()
            .cloned()
            .ok_or_else(|| "grouped leaves of a 0-d loop".to_string())?;
        let origin = self.abi(crate::abi::AbiParam::Origin {
            param: lp.over,
            dim: 0,
        });
        let (local, step, tid64) = self.grid();
        let shift = self.tmp("s64");
        self.line("// blocks on aligned runs of the global coordinates");
        self.line(format!("and.b64 {shift}, {origin}, {};", block - 1));
        self.line(format!("sub.s64 {local}, {local}, {shift};"));
        // Each leaf's slots: weft_group + (leaf * BLOCK + thread) * 8.
        let (base, mine) = (self.tmp("u64"), self.tmp("u64"));
        self.line(format!("mov.u64 {base}, weft_group;"));
        self.line(format!("shl.b64 {mine}, {tid64}, 3;"));
        self.line(format!("add.s64 {mine}, {base}, {mine};"));
        self.group_slots = Some(leaves.len() as u64 * block * 8);
        let (head, end, skip) = (
            self.label("group"),
            self.label("group_done"),
            self.label("group_point_done"),
        );
        let (first, done, active, below) = (
            self.tmp("s64"),
            self.tmp("pred"),
            self.tmp("pred"),
            self.tmp("pred"),
        );
        self.place(&head);
        self.line(format!("sub.s64 {first}, {local}, {tid64};"));
        self.line(format!("setp.ge.s64 {done}, {first}, {n};"));
        self.line(format!("@{done} bra.uni {end};"));
        self.line(format!("setp.ge.s64 {active}, {local}, 0;"));
        self.line(format!("setp.lt.s64 {below}, {local}, {n};"));
        self.line(format!("and.pred {active}, {active}, {below};"));
        for leaf in leaves {
            let acc = format!("%acc_p{}", leaf.param);
            let identity = super::literal(exact_identity(leaf.op, leaf.dtype));
            self.line(format!("mov.{} {acc}, {identity};", reg_type(leaf.dtype)));
        }
        self.line(format!("@!{active} bra {skip};"));
        let ix = self.reg(lp.indices[0]);
        self.line(format!("mov.s64 {ix}, {local};"));
        for inst in &lp.body {
            self.inst(inst)?;
        }
        self.place(&skip);
        for (k, leaf) in leaves.iter().enumerate() {
            let acc = format!("%acc_p{}", leaf.param);
            let ty = reg_type(leaf.dtype);
            let at = k as u64 * block * 8;
            self.line(format!("st.shared.{ty} [{mine}+{at}], {acc};"));
        }
        self.line("bar.sync 0;");
        let mut span = 1u64;
        while span < block {
            let fan = FAN.min(block / span);
            self.group_round(leaves, (&local, &n, &tid64, &base), span, fan)?;
            self.line("bar.sync 0;");
            span *= fan;
        }
        // Absorbed: the node of twice the thread's lowest set bit `p` that ends past it,
        // `[local - p, local + p)`, was formed.
        let (low, neg, lo_end, absorbed, p2) = (
            self.tmp("s64"),
            self.tmp("s64"),
            self.tmp("s64"),
            self.tmp("pred"),
            self.tmp("pred"),
        );
        self.line(format!("neg.s64 {neg}, {tid64};"));
        self.line(format!("and.b64 {low}, {tid64}, {neg};"));
        self.line(format!("setp.ne.s64 {absorbed}, {low}, 0;"));
        self.line(format!("sub.s64 {lo_end}, {local}, {low};"));
        self.line(format!("setp.ge.s64 {p2}, {lo_end}, 0;"));
        self.line(format!("and.pred {absorbed}, {absorbed}, {p2};"));
        self.line(format!("add.s64 {lo_end}, {local}, {low};"));
        self.line(format!("setp.le.s64 {p2}, {lo_end}, {n};"));
        self.line(format!("and.pred {absorbed}, {absorbed}, {p2};"));
        let write = self.tmp("pred");
        self.line(format!("not.pred {write}, {absorbed};"));
        self.line(format!("and.pred {write}, {write}, {active};"));
        for (k, leaf) in leaves.iter().enumerate() {
            let ty = reg_type(leaf.dtype);
            let at = k as u64 * block * 8;
            let v = self.tmp(reg_type(leaf.dtype));
            let leaf_base = self.abi(crate::abi::AbiParam::Leaf { param: leaf.param });
            let (offset, addr) = (self.tmp("u64"), self.tmp("u64"));
            let size = leaf.dtype.size().trailing_zeros();
            self.line(format!("ld.shared.{ty} {v}, [{mine}+{at}];"));
            self.line(format!("shl.b64 {offset}, {local}, {size};"));
            self.line(format!("add.s64 {addr}, {leaf_base}, {offset};"));
            self.line(format!("@{write} st.global.{ty} [{addr}], {v};"));
        }
        // The slots are read before the next step writes them.
        self.line("bar.sync 0;");
        self.line(format!("add.s64 {local}, {local}, {step};"));
        self.line(format!("bra.uni {head};"));
        self.place(&end);
        Ok(())
    }

    /// One round: each thread whose index is a multiple of `span * fan` combines the `fan`
    /// slots `span` apart from its own, levels `span`, `2 span`, ... in registers, each pair
    /// when the node it forms lies inside the range `[0, n)` of local points, and writes back
    /// the slots that may have changed.
    fn group_round(
        &mut self,
        leaves: &[Leaf],
        (local, n, tid64, base): (&str, &str, &str, &str),
        span: u64,
        fan: u64,
    ) -> Res {
        let block = u64::from(BLOCK_THREADS);
        let skip = self.label("group_round_done");
        let (low, off) = (self.tmp("s64"), self.tmp("pred"));
        self.line(format!("and.b64 {low}, {tid64}, {};", span * fan - 1));
        self.line(format!("setp.ne.s64 {off}, {low}, 0;"));
        self.line(format!("@{off} bra {skip};"));
        // Which pairs form: `joins[h][i]` for the node of `2 h` children from child `i`.
        let mut joins: Vec<(u64, u64, String)> = Vec::new();
        let mut h = 1;
        while h < fan {
            for i in (0..fan).step_by((2 * h) as usize) {
                let (lo, hi, inside, ok) = (
                    self.tmp("s64"),
                    self.tmp("s64"),
                    self.tmp("pred"),
                    self.tmp("pred"),
                );
                self.line(format!("add.s64 {lo}, {local}, {};", i * span));
                self.line(format!("add.s64 {hi}, {lo}, {};", 2 * h * span));
                self.line(format!("setp.ge.s64 {inside}, {lo}, 0;"));
                self.line(format!("setp.le.s64 {ok}, {hi}, {n};"));
                self.line(format!("and.pred {inside}, {inside}, {ok};"));
                joins.push((h, i, inside));
            }
            h *= 2;
        }
        let slot = self.tmp("u64");
        self.line(format!("shl.b64 {slot}, {tid64}, 3;"));
        self.line(format!("add.s64 {slot}, {base}, {slot};"));
        for (k, leaf) in leaves.iter().enumerate() {
            let ty = reg_type(leaf.dtype);
            let inst = match leaf.op {
                ReduceOp::Prod => format!("mul.rn.{ty}"),
                _ => format!("add.rn.{ty}"),
            };
            let at = k as u64 * block * 8;
            let values: Vec<String> = (0..fan).map(|_| self.tmp(reg_type(leaf.dtype))).collect();
            for (i, v) in values.iter().enumerate() {
                let o = at + i as u64 * span * 8;
                self.line(format!("ld.shared.{ty} {v}, [{slot}+{o}];"));
            }
            for (h, i, inside) in &joins {
                let (l, r) = (&values[*i as usize], &values[(*i + *h) as usize]);
                self.line(format!("@{inside} {inst} {l}, {l}, {r};"));
            }
            for i in (0..fan).step_by(2) {
                let o = at + i * span * 8;
                self.line(format!(
                    "st.shared.{ty} [{slot}+{o}], {};",
                    values[i as usize]
                ));
            }
        }
        self.place(&skip);
        Ok(())
    }

    /// The shared memory of a grouped entry, if this is one.
    pub(super) fn group_shared(&self) -> Option<String> {
        self.group_slots
            .map(|bytes| format!("    .shared .align 8 .b8 weft_group[{bytes}];\n"))
    }
}
