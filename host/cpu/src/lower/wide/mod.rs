//! Wide loop bodies: the varying part of a vectorizable loop with 64-bit lanes, as machine code
//! of its own in registers wider than Cranelift's: 256-bit `ymm` registers (AVX2, four lanes)
//! or 512-bit `zmm` registers (AVX-512, eight lanes).
//!
//! Cranelift 0.135's x86-64 back end has 128-bit vectors only. For a loop that
//! [`super::vector`] takes, with `f64`/`i64` lanes, no reduction into a register and no use of
//! the loop index as a value, this module emits a function
//!
//! ```text
//! extern "C" fn(args: *const u64, steps: i64) -> i64
//! ```
//!
//! that runs `steps` steps of [`Isa::step`] iterations (a vector's lanes times
//! [`Isa::unroll`] vectors interleaved instruction by instruction). `args` holds one pointer per
//! contiguous access (the address of the first iteration's element), then the bits of each
//! uniform value that the body reads. Constants live in a table that the function addresses
//! directly. The vector function calls it for each row's first `step * floor(len / step)`
//! iterations and runs the rest as before, or, for a body that runs whole rows (see
//! [`WideBody::masks`]), for the whole row: the body then runs the last `len % step`
//! iterations one vector at a time, the last, partial vector with its loads and stores
//! masked to its lanes, and then, where the vector function walks them
//! ([`ArgWord::Rows`]), the rows that follow, each pointer advanced by its row stride.
//!
//! Every operation is the one the 128-bit and scalar code perform, lane by lane, in the same
//! operand order (the IR's `fma` is a `vfmadd...pd`, rounded once, as the scalar FMA
//! instruction): no contraction into fused multiply-adds, no reassociation, the scalar rules
//! for `min`/`max`, so results are the same bits on every path (up to the sign and payload of a
//! NaN made by arithmetic, which the IR leaves unspecified and Cranelift's optimizer changes).
//! Masks (comparison results, `bool` values) live in `k` registers on AVX-512 and in vectors of
//! all-ones or all-zeros lanes on AVX2.
//!
//! [`compile`] selects instructions ([`regalloc::MInst`], by [`select`]) from the body, then
//! [`regalloc::emit_body`] allocates registers and encodes them ([`encode`]), and the function
//! around them is assembled here.

mod encode;
mod fold;
mod regalloc;
mod select;

pub(crate) use fold::{FoldBody, FoldWord, UNROLL, compile_fold};

use weft_ir::reduction::GROUP_LEVEL;
use weft_ir::validate::Types;
use weft_ir::{Op, ParallelLoop, ReduceOp, Scalar, ValueId};

use self::encode::{Asm, Mem, Rm, VecOp, gpr, op};
use self::regalloc::{Class, Frame, MInst, VReg};
use self::select::Select;
use super::vector::{ConstTable, VecPlan};

/// The instruction set of a wide body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Isa {
    /// AVX2 (VEX-encoded, 256 bits, 16 registers).
    Avx2,
    /// AVX-512 F and DQ (EVEX-encoded, 512 bits, 32 registers and mask registers).
    Avx512,
}

impl Isa {
    /// Whether this CPU runs bodies of this instruction set (enabled by the OS).
    pub(crate) fn detected(self) -> bool {
        #[cfg(all(target_arch = "x86_64", unix))]
        {
            match self {
                Isa::Avx2 => std::is_x86_feature_detected!("avx2"),
                Isa::Avx512 => {
                    std::is_x86_feature_detected!("avx512f")
                        && std::is_x86_feature_detected!("avx512dq")
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", unix)))]
        {
            false
        }
    }

    /// Whether this CPU has the FMA instructions (`vfmadd...pd`), which bodies with `fma`
    /// need besides their instruction set.
    pub(crate) fn fma_detected() -> bool {
        #[cfg(all(target_arch = "x86_64", unix))]
        {
            std::is_x86_feature_detected!("fma")
        }
        #[cfg(not(all(target_arch = "x86_64", unix)))]
        {
            false
        }
    }

    /// The widest instruction set this CPU runs, if any.
    pub(crate) fn widest_detected() -> Option<Isa> {
        [Isa::Avx512, Isa::Avx2].into_iter().find(|i| i.detected())
    }

    /// Its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Avx2 => "AVX2",
            Isa::Avx512 => "AVX-512",
        }
    }

    /// 64-bit lanes per vector.
    pub(crate) fn lanes(self) -> i64 {
        match self {
            Isa::Avx2 => 4,
            Isa::Avx512 => 8,
        }
    }

    /// Vectors per step, interleaved instruction by instruction.
    pub(crate) fn unroll(self) -> usize {
        4
    }

    /// Iterations per step of the function.
    pub(crate) fn step(self) -> i64 {
        self.lanes() * self.unroll() as i64
    }

    /// Vector registers.
    pub(crate) fn vector_registers(self) -> usize {
        match self {
            Isa::Avx2 => 16,
            Isa::Avx512 => 32,
        }
    }

    /// Bytes per constant-table entry (one element on AVX-512, which broadcasts it from
    /// memory; a whole vector of copies on AVX2, which cannot).
    fn const_bytes(self) -> usize {
        match self {
            Isa::Avx2 => 32,
            Isa::Avx512 => 16,
        }
    }
}

/// One word of a call's argument array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArgWord {
    /// The address of the row's element at the first iteration of the call, for the
    /// contiguous access of store parameter `.0` at indices `.1`.
    RowBase(u32, Vec<ValueId>),
    /// The bits of a uniform value (a `f64` or an `i64`; a `bool` as all ones or zero).
    Uniform(ValueId),
    /// For a body that runs whole rows ([`WideBody::masks`]): how many whole vectors of the
    /// row's last `r < step` iterations run one at a time, `r / lanes`.
    Vectors,
    /// For a body that runs whole rows: the address of the lane masks of the row's last,
    /// partial vector, `masks + 8 * (16 - q)` for its `q = r % lanes` iterations, or 0 when
    /// the row has none.
    Masks,
    /// For a body that runs whole rows: the whole steps of each row, `len / step` (the
    /// function's `steps` argument is then unused).
    Steps,
    /// For a body that runs whole rows: how many rows it runs, at least one. Each row has
    /// the first's length; between rows, each [`ArgWord::RowBase`] pointer advances by its
    /// [`ArgWord::RowStride`].
    Rows,
    /// For a body that runs whole rows: the bytes between consecutive rows of the `.0`-th
    /// [`ArgWord::RowBase`] pointer.
    RowStride(u32),
}

/// A compiled wide body.
#[derive(Debug)]
pub(crate) struct WideBody {
    /// Its instruction set.
    pub isa: Isa,
    /// The machine code of the function.
    pub code: Vec<u8>,
    /// The constants it reads (at a fixed address): must live as long as the code.
    pub table: ConstTable,
    /// What the caller puts in each word of the argument array.
    pub args: Vec<ArgWord>,
    /// Where the body runs whole rows: the address of its lane-mask table (16 words of all
    /// ones, then 16 of zeros). After its `steps` whole steps the function runs the row's
    /// last `r < step` iterations one vector at a time ([`ArgWord::Vectors`]), the last,
    /// partial vector masked (its loads and stores move only its lanes, so nothing past the
    /// row is read or written), as [`ArgWord::Masks`] says. Bodies without gathers,
    /// widened loads or grouped stores.
    pub masks: Option<u64>,
}

/// Registers for pointer arguments: caller-saved first, then callee-saved (saved by the
/// function).
const PTR_REGS: [u8; 10] = [
    gpr::RCX,
    gpr::R8,
    gpr::R9,
    gpr::R10,
    gpr::R11,
    gpr::RBX,
    gpr::R12,
    gpr::R13,
    gpr::R14,
    gpr::R15,
];

/// Compiles the varying part of `pl` (as `plan` splits it) into a function of `isa`, or says
/// why it does not qualify. `const_of` gives the value of each uniform value that is a
/// constant.
///
/// The stores into the leaf stores `grouped` (with their operators) at the loop's index
/// leave them *grouped* (see [`weft_ir::reduction::grouped_nodes_with`]): the caller starts
/// the steps on a group boundary, each aligned group of eight points is combined in registers
/// by the canonical tree ([`select::Select::group_tree`]), and only its node is stored, into
/// the group's first element.
pub(crate) fn compile(
    isa: Isa,
    pl: &ParallelLoop,
    plan: &VecPlan,
    types: &Types,
    const_of: &dyn Fn(ValueId) -> Option<Scalar>,
    grouped: &[(u32, ReduceOp)],
) -> Result<WideBody, String> {
    if plan.lanes != 2 {
        return Err("not 64-bit lanes".into());
    }
    if plan.uses_iota {
        return Err("uses the loop index as a value".into());
    }
    let mut s = Select::new(isa, plan, types, const_of);
    let mut ptrs: Vec<(u32, Vec<ValueId>)> = Vec::new();
    let mut ptr_of = |param: u32, indices: &[ValueId]| -> u32 {
        match ptrs
            .iter()
            .position(|(p, ix)| *p == param && ix.as_slice() == indices)
        {
            Some(i) => i as u32,
            None => {
                ptrs.push((param, indices.to_vec()));
                ptrs.len() as u32 - 1
            }
        }
    };
    // Vectors per group of eight points.
    let per_group = usize::try_from((1i64 << GROUP_LEVEL) / isa.lanes())
        .map_err(|e| e.to_string())?
        .max(1);
    for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
        if at_row {
            continue;
        }
        if matches!(inst.op, Op::Reduce(..)) {
            return Err("a reduction".into());
        }
        let group_op = match &inst.op {
            Op::Store(acc, v) if acc.indices == pl.indices => grouped
                .iter()
                .find(|g| g.0 == acc.param)
                .map(|g| (g.1, acc, *v)),
            _ => None,
        };
        let Some((red, acc, v)) = group_op else {
            for copy in 0..isa.unroll() {
                s.inst(copy, inst, &mut ptr_of)?;
            }
            continue;
        };
        let ptr = ptr_of(acc.param, &acc.indices);
        let mut copies = Vec::with_capacity(per_group);
        for copy in 0..isa.unroll() {
            copies.push(s.stored(copy, v)?);
            if copies.len() == per_group {
                let node = s.group_tree(red, &copies)?;
                let first = copy + 1 - per_group;
                let disp =
                    i32::try_from(first as i64 * isa.lanes() * 8).map_err(|e| e.to_string())?;
                s.store_lane0(node, ptr, disp);
                copies.clear();
            }
        }
        if !copies.is_empty() {
            return Err("internal: a step of a partial group".into());
        }
    }
    // A body that runs whole rows also runs the row's last iterations one vector at a time,
    // the last vector masked: the body again, selected for one vector (the same pointers,
    // uniform values and constants, in the same order).
    let single = if grouped.is_empty() && s.insts.iter().all(|i| maskable(None, i)) {
        let mut one = Select::new(isa, plan, types, const_of);
        for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
            if !at_row {
                one.inst(0, inst, &mut ptr_of)?;
            }
        }
        let same = one.uniforms.args == s.uniforms.args && one.uniforms.consts == s.uniforms.consts;
        (same && one.insts.iter().all(|i| maskable(Some(isa), i))).then_some(one)
    } else {
        None
    };
    if ptrs.len() > PTR_REGS.len() {
        return Err(format!("{} contiguous accesses", ptrs.len()));
    }
    let words = (ptrs.len() + s.uniforms.args.len()) as u32;
    let tail = single.as_ref().map(|one| Tail {
        insts: &one.insts,
        classes: &one.classes,
        vectors_word: words,
        masks_word: words + 1,
        steps_word: words + 2,
        rows_word: words + 3,
        strides_word: words + 4,
    });
    let pointers = ptrs.len() as u32;
    let whole_rows = tail.is_some();
    // With bool bytes among the pointers, the step's offset counts elements, scaled per
    // pointer (bytes at scale 0, 64-bit elements at scale 3); else it counts bytes.
    let (scales, advance) = if s.byte_ptrs.is_empty() {
        (vec![0; ptrs.len()], isa.step() * 8)
    } else {
        if whole_rows {
            return Err("internal: a body of bool bytes that runs whole rows".into());
        }
        let scales = (0..ptrs.len() as u32)
            .map(|p| if s.byte_ptrs.contains(&p) { 0 } else { 3 })
            .collect();
        (scales, isa.step())
    };
    let (code, table, masks) = assemble(Body {
        isa,
        insts: &s.insts,
        classes: &s.classes,
        consts: &s.uniforms.consts,
        scales,
        uniforms: s.uniforms.args.len(),
        advance: i32::try_from(advance).map_err(|e| e.to_string())?,
        carry: None,
        tail,
    })?;
    let mut args: Vec<ArgWord> = ptrs
        .into_iter()
        .map(|(p, ix)| ArgWord::RowBase(p, ix))
        .collect();
    args.extend(s.uniforms.args.into_iter().map(ArgWord::Uniform));
    if whole_rows {
        args.extend([
            ArgWord::Vectors,
            ArgWord::Masks,
            ArgWord::Steps,
            ArgWord::Rows,
        ]);
        args.extend((0..pointers).map(ArgWord::RowStride));
    }
    Ok(WideBody {
        isa,
        code,
        table,
        args,
        masks,
    })
}

/// Whether `inst` may run in a masked step: its loads and stores are whole vectors (not
/// gathers, widened `i32` loads or one lane) at an offset of the step that the masks of
/// `isa` cover (any offset without `isa`; on AVX-512 the step's one vector), its other
/// operations touch no memory but the frame's, and nothing carries from step to step.
fn maskable(isa: Option<Isa>, inst: &MInst) -> bool {
    match inst {
        MInst::Load { disp, .. } | MInst::Store { disp, .. } => match isa {
            None => true,
            Some(Isa::Avx2) => {
                disp % 8 == 0 && (0..=regalloc::MASKED_STEP_BYTES - 32).contains(disp)
            }
            // One vector, its mask in a mask register (see `regalloc::Frame::masked`).
            Some(Isa::Avx512) => *disp == 0,
        },
        MInst::StoreLane0 { .. }
        | MInst::LoadWiden { .. }
        | MInst::LoadBytes { .. }
        | MInst::StoreBytes { .. }
        | MInst::CheckIndices { .. }
        | MInst::Gather { .. }
        | MInst::Pin { .. } => false,
        MInst::Op3 { .. }
        | MInst::Op2 { .. }
        | MInst::Fma { .. }
        | MInst::ShiftImm { .. }
        | MInst::Blend { .. }
        | MInst::Bcast { .. }
        | MInst::KOp { .. }
        | MInst::KNot { .. } => true,
    }
}

/// What [`assemble`] puts a function around.
struct Body<'a> {
    isa: Isa,
    /// The selected body, its virtual registers' classes and the constants it reads.
    insts: &'a [MInst],
    classes: &'a [Class],
    consts: &'a [u64],
    /// Argument words: one pointer per entry of `scales` (the scale of the step's offset in
    /// its accesses, as a power of two), then `uniforms` uniform values.
    scales: Vec<u8>,
    uniforms: usize,
    /// The step's offset advances by this much per step (bytes at scale 0).
    advance: i32,
    /// Values carried from step to step, if any.
    carry: Option<Carry>,
    /// For a body that runs whole rows (see [`WideBody::masks`]): its one-vector form.
    tail: Option<Tail<'a>>,
}

/// The one-vector form of a body that runs whole rows, and the argument words that say how
/// many whole vectors it runs ([`ArgWord::Vectors`]) and the last vector's lane masks
/// ([`ArgWord::Masks`]).
struct Tail<'a> {
    insts: &'a [MInst],
    classes: &'a [Class],
    vectors_word: u32,
    masks_word: u32,
    /// The words of [`ArgWord::Steps`], [`ArgWord::Rows`] and the first
    /// [`ArgWord::RowStride`].
    steps_word: u32,
    rows_word: u32,
    strides_word: u32,
}

/// Vectors that the body carries from step to step in pinned registers (see
/// [`regalloc::emit_body`]): loaded before the first step from the address in argument word
/// `word`, one vector after the other, and stored back there after the last.
struct Carry {
    word: u32,
    pinned: Vec<(VReg, u8)>,
}

/// The constant table of `consts` for `isa`, the address of its first entry (entries of
/// [`Isa::const_bytes`], 32-byte aligned on AVX2), and that of its lane masks (with `masks`;
/// see [`WideBody::masks`]).
fn const_table(isa: Isa, consts: &[u64], masks: bool) -> (ConstTable, u64, u64) {
    let per = isa.const_bytes() / 16;
    // One spare entry to align to 32 bytes; the masks (32 words) after the constants.
    let mask_entries = if masks { MASK_WORDS / 2 } else { 0 };
    let mut entries =
        vec![0u128; consts.len().max(1) * per + mask_entries + per - 1].into_boxed_slice();
    let skip = match isa {
        Isa::Avx2 => (entries.as_ptr() as usize % 32) / 16,
        Isa::Avx512 => 0,
    };
    for (k, &c) in consts.iter().enumerate() {
        let e = match isa {
            Isa::Avx2 => u128::from(c) | (u128::from(c) << 64),
            Isa::Avx512 => u128::from(c),
        };
        entries[skip + k * per..skip + (k + 1) * per].fill(e);
    }
    let first_mask = skip + consts.len().max(1) * per;
    entries[first_mask..first_mask + mask_entries / 2].fill(u128::MAX);
    let at = entries[skip..].as_ptr() as u64;
    let masks_at = entries[first_mask..].as_ptr() as u64;
    (ConstTable::new(entries), at, masks_at)
}

/// Words in a lane-mask table: 16 of all ones, then 16 of zeros (see [`WideBody::masks`]).
const MASK_WORDS: usize = 32;

/// The function around a body: saves what it uses, loads the pointers (on AVX2, broadcasts
/// the uniform arguments onto the stack) and the carried vectors, runs the steps, stores the
/// carried vectors, and returns the steps it did not run: 0, or, when a step's
/// [`regalloc::MInst::CheckIndices`] left early, that step and those after it (the carried
/// vectors are then those before that step). Returns its machine code and constant table.
fn assemble(s: Body<'_>) -> Result<(Vec<u8>, ConstTable, Option<u64>), String> {
    let isa = s.isa;
    let pointers = s.scales.len();
    if pointers > PTR_REGS.len() {
        return Err(format!("{pointers} pointer arguments"));
    }
    let (table, table_at, masks_at) = const_table(isa, s.consts, s.tail.is_some());
    let ptr_regs = PTR_REGS[..pointers].to_vec();
    let first_uniform = pointers as u32;
    let broadcast = match isa {
        Isa::Avx2 => s.uniforms as u32,
        Isa::Avx512 => 0,
    };
    let frame = Frame {
        isa,
        ptr_regs: ptr_regs.clone(),
        ptr_scales: s.scales.clone(),
        index: gpr::RAX,
        consts: gpr::RDX,
        args: gpr::RDI,
        first_uniform,
        slots_at: (broadcast * 32).next_multiple_of(64),
        masked: None,
    };
    let mut body = Asm::new(isa);
    let pinned = s.carry.as_ref().map_or(&[][..], |c| &c.pinned[..]);
    let mut slots = regalloc::emit_body(s.insts, s.classes, &frame, pinned, &mut body)?;
    // The one-vector form of a body that runs whole rows, plain and with its loads and
    // stores masked by the lane masks that `rsi` then addresses.
    let tail = match &s.tail {
        Some(t) => {
            let mut one = Asm::new(isa);
            slots = slots.max(regalloc::emit_body(
                t.insts, t.classes, &frame, pinned, &mut one,
            )?);
            let masked_frame = Frame {
                masked: Some(gpr::RSI),
                ..frame.clone()
            };
            let mut m = Asm::new(isa);
            slots = slots.max(regalloc::emit_body(
                t.insts,
                t.classes,
                &masked_frame,
                pinned,
                &mut m,
            )?);
            if !m.exits.is_empty() || !one.exits.is_empty() || !body.exits.is_empty() {
                return Err("internal: a body that runs whole rows leaves early".into());
            }
            Some((t, one, m))
        }
        None => None,
    };
    let saved: Vec<u8> = ptr_regs
        .iter()
        .copied()
        .filter(|r| matches!(*r, gpr::RBX | gpr::R12 | gpr::R13 | gpr::R14 | gpr::R15))
        .collect();

    let mut a = Asm::new(isa);
    a.push(gpr::RBP);
    a.mov_rr(gpr::RBP, gpr::RSP);
    for &r in &saved {
        a.push(r);
    }
    a.and_imm(gpr::RSP, -64);
    let bytes = u64::from(frame.slots_at) + u64::from(slots) * 64;
    if bytes > 0 {
        reserve_frame(&mut a, i32::try_from(bytes).map_err(|e| e.to_string())?);
    }
    a.mov_imm64(gpr::RDX, table_at);
    for (i, &r) in ptr_regs.iter().enumerate() {
        a.mov_load(r, Mem::at(gpr::RDI, (i * 8) as i32));
    }
    // AVX2 reads uniform operands as whole vectors: copy `i` at `rsp + 32 * i`.
    for i in 0..broadcast {
        let word = Mem::at(gpr::RDI, ((first_uniform + i) * 8) as i32);
        let copy = Mem::at(gpr::RSP, (i * 32) as i32);
        a.vector(
            op::VBROADCASTSD,
            0,
            None,
            Rm::Mem {
                mem: word,
                bcst: false,
            },
            0,
            None,
        );
        a.vector(
            op::VMOVAPD_STORE,
            0,
            None,
            Rm::Mem {
                mem: copy,
                bcst: false,
            },
            0,
            None,
        );
    }
    // The carried vectors, from the address in their argument word (through `rax`, which the
    // steps then count in).
    let carried = |a: &mut Asm, ins: VecOp, c: &Carry| {
        a.mov_load(gpr::RAX, Mem::at(gpr::RDI, (c.word * 8) as i32));
        for (g, &(_, hw)) in c.pinned.iter().enumerate() {
            let mem = Mem::at(gpr::RAX, (g as i64 * isa.lanes() * 8) as i32);
            a.vector(ins, hw, None, Rm::Mem { mem, bcst: false }, 0, None);
        }
    };
    if let Some(c) = &s.carry {
        carried(&mut a, op::VMOVUPD_LOAD, c);
    }
    // A body that runs whole rows starts each row here, its steps from their word.
    let row_top = a.code.len();
    if let Some((t, ..)) = &tail {
        a.mov_load(gpr::RSI, Mem::at(gpr::RDI, (t.steps_word * 8) as i32));
    }
    a.zero(gpr::RAX);
    a.test(gpr::RSI);
    // jle: no steps.
    let skip = a.jcc_forward(0xe);
    let top = a.code.len();
    a.code.extend_from_slice(&body.code);
    a.add_imm(gpr::RAX, s.advance);
    a.sub_imm(gpr::RSI, 1);
    // jnz top
    a.jcc(0x5, top);
    // The early exits land here too, `rsi` still counting the step they left.
    a.patch(skip);
    for &e in &body.exits {
        a.patch(top + e);
    }
    if let Some(c) = &s.carry {
        carried(&mut a, op::VMOVUPD_STORE, c);
    }
    match &tail {
        // The row's last iterations: whole vectors (`rsi` counting them), then the partial
        // one, if any (`rsi`: its lane masks' address, or 0); every step ran.
        Some((t, one, m)) => {
            a.mov_load(gpr::RSI, Mem::at(gpr::RDI, (t.vectors_word * 8) as i32));
            a.test(gpr::RSI);
            // jle: no whole vector.
            let no_vector = a.jcc_forward(0xe);
            let top = a.code.len();
            a.code.extend_from_slice(&one.code);
            a.add_imm(
                gpr::RAX,
                i32::try_from(isa.lanes() * 8).map_err(|e| e.to_string())?,
            );
            a.sub_imm(gpr::RSI, 1);
            // jnz top
            a.jcc(0x5, top);
            a.patch(no_vector);
            a.mov_load(gpr::RSI, Mem::at(gpr::RDI, (t.masks_word * 8) as i32));
            a.test(gpr::RSI);
            // je: no partial vector.
            let none = a.jcc_forward(0x4);
            a.code.extend_from_slice(&m.code);
            a.patch(none);
            // The next row: each pointer by its row stride, while rows are left.
            for (k, &r) in ptr_regs.iter().enumerate() {
                let stride = (t.strides_word as usize + k) * 8;
                a.add_load(r, Mem::at(gpr::RDI, stride as i32));
            }
            let rows = Mem::at(gpr::RDI, (t.rows_word * 8) as i32);
            a.mov_load(gpr::RSI, rows);
            a.sub_imm(gpr::RSI, 1);
            a.mov_store(rows, gpr::RSI);
            // jnz: another row.
            a.jcc(0x5, row_top);
            a.zero(gpr::RAX);
        }
        None => a.mov_rr(gpr::RAX, gpr::RSI),
    }
    // rsp = rbp - 8 * saved, then restore.
    a.mov_rr(gpr::RSP, gpr::RBP);
    if !saved.is_empty() {
        a.sub_imm(gpr::RSP, (saved.len() * 8) as i32);
    }
    for &r in saved.iter().rev() {
        a.pop(r);
    }
    a.pop(gpr::RBP);
    a.vzeroupper();
    a.ret();
    Ok((a.code, table, tail.is_some().then_some(masks_at)))
}

/// The page size that stack probes step by.
const PROBE_STEP: i32 = 4096;

/// Moves `rsp` down by `bytes` and touches every page of the new frame from the top down, as
/// Cranelift's inline probes do, so that a frame cannot step over the stack's guard page.
fn reserve_frame(a: &mut Asm, bytes: i32) {
    a.sub_imm(gpr::RSP, bytes);
    for offset in probe_offsets(bytes) {
        a.mov_load(gpr::RAX, Mem::at(gpr::RSP, offset));
    }
}

/// The offsets from the new `rsp` that a frame of `bytes` touches, highest first: one per
/// page, each within [`PROBE_STEP`] of the one before (the first within it of the old `rsp`),
/// ending at `rsp` itself.
fn probe_offsets(bytes: i32) -> Vec<i32> {
    let mut offsets = Vec::new();
    let mut at = bytes;
    while at > 0 {
        at = (at - PROBE_STEP).max(0);
        offsets.push(at);
    }
    offsets
}

#[cfg(test)]
mod probe_tests {
    use super::*;

    #[test]
    fn probes_touch_every_page_of_a_frame_from_the_top_down() {
        for bytes in [
            1,
            64,
            4095,
            4096,
            4097,
            12_288,
            256 << 10,
            (256 << 10) + 192,
        ] {
            let offsets = probe_offsets(bytes);
            assert_eq!(offsets.last(), Some(&0), "{bytes}: ends at rsp");
            let mut above = bytes;
            for &o in &offsets {
                assert!(o < above && above - o <= PROBE_STEP, "{bytes}: {offsets:?}");
                above = o;
            }
        }
        assert!(probe_offsets(0).is_empty());
    }

    /// The code that reserves a frame of three pages and a bit is `sub rsp` followed by one
    /// load per page, highest first, each encoded as the assembler encodes a load.
    #[test]
    fn a_reserved_frame_is_probed_page_by_page() {
        for isa in [Isa::Avx2, Isa::Avx512] {
            let bytes = 3 * PROBE_STEP + 100;
            let mut got = Asm::new(isa);
            reserve_frame(&mut got, bytes);
            let mut want = Asm::new(isa);
            want.sub_imm(gpr::RSP, bytes);
            for offset in [2 * PROBE_STEP + 100, PROBE_STEP + 100, 100, 0] {
                want.mov_load(gpr::RAX, Mem::at(gpr::RSP, offset));
            }
            assert_eq!(got.code, want.code, "{isa:?}");
        }
    }
}
