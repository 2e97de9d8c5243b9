//! Traces: the back-end work of one step of a repeated loop, recorded while the step runs and
//! replayed for the steps after it without running the step again, as Legion's tracing
//! replays a recorded stretch of tasks.
//!
//! A time-stepped loop makes the same calls every step: the same plugin calls, the same
//! tasks over the same stores, the same windows, the same fused kernels with the same
//! bindings. Everything above the back end (the plugin's calls, submitting, the dependence
//! analysis, planning, binding) then decides the same thing every step, and costs more than
//! the kernels of a small step. [`Core::begin_trace`] puts a recorder in front of the back
//! end; [`Core::end_trace`] takes it away and keeps what it saw as a [`Trace`]:
//! allocations, frees, writes, copies and launches, with the buffers a step allocates for
//! itself named by their order ([`BufRef::Slot`]) and every other buffer by its id.
//! [`Core::replay`] makes the same calls on the back end again.
//!
//! A step is traced only where its replay is the step: a step that reads a store on the host,
//! drops partial reductions, frees a buffer that it did not allocate, keeps one that it did,
//! or runs on several ranks, gives no trace. The executor's folds of partial reductions
//! into their targets are the one host work a trace keeps (a fold event): the executor
//! announces each (`Recording::begin_fold`), and a replay folds its own partials the same
//! way (`executor::fold_reductions`). The caller
//! (`weft::Numeric::repeat`) replays a trace only once consecutive steps recorded the same
//! calls ([`Trace::follows`]): two the same, or three whose only differences are numbers of
//! some bindings (offsets, extents, strides, origins) and sizes of the buffers the step
//! allocates and copies, each changed by the same amount from one step to the next (a loop
//! that reads `a[t]` at step `t`, updates `a[:t + 1]` in a launch of one point, or makes a
//! temporary of `a[:t]`); a replay `k` steps on moves those `k` times further. The back end
//! still checks every replayed view against its buffer. The step's own
//! code (its closure) must keep doing so, which the recordings check but cannot prove.

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;

use weft_ir::Scalar;
use weft_ir::reduction::LoopPartial;

use crate::backend::{Backend, Binding, BufferId, MemoryStats, Prepared};
use crate::cache::Owner;
use crate::core::Core;
use crate::kernel::{KernelEntry, KernelId};
use crate::{Error, Result};

/// A buffer named in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufRef {
    /// A buffer that was there before the step (a store the step reads or updates).
    Fixed(BufferId),
    /// The `n`th buffer the step allocated (counted from 0).
    Slot(usize),
}

/// One call on the back end, as a trace keeps it.
#[derive(Clone, Debug)]
enum Event {
    Alloc {
        bytes: u64,
        uninit: bool,
    },
    Free(BufRef),
    Write {
        buffer: BufRef,
        offset: u64,
        data: Vec<u8>,
    },
    Copy {
        from: BufRef,
        to: BufRef,
        bytes: u64,
    },
    SoleLaunch(bool),
    /// A launch; `buffers[i]` names the buffer of `bindings[i]` (`None` for scratch).
    Launch {
        kernel: KernelId,
        bindings: Vec<Binding>,
        buffers: Vec<Option<BufRef>>,
        scalars: Vec<Scalar>,
    },
    /// `take_reductions`, which gave nothing back.
    TakeReductions,
    /// `take_reductions`, whose partials the executor folded into the targets of the last
    /// launch's bindings (`executor::fold_reductions`, through reads and writes of the back
    /// end that the event stands for); the kernel's name is for errors.
    Fold(String),
    FinishDeferred(bool),
}

impl Event {
    /// Whether `other` makes the same call up to the numbers of its bindings (offsets,
    /// extents, strides, origins, views: see [`each_number`]): the differences (`other`'s less
    /// this one's) by binding and number, those that are not zero; `None` where anything else
    /// differs (the kernel, the buffers, a binding's kind, rank or element size, a scalar).
    fn moves_to(&self, other: &Event) -> Option<Vec<(usize, usize, i64)>> {
        use Event::*;
        match (self, other) {
            (
                Launch {
                    kernel,
                    bindings,
                    buffers,
                    scalars,
                },
                Launch {
                    kernel: k2,
                    bindings: b2,
                    buffers: r2,
                    scalars: s2,
                },
            ) => {
                let same = kernel == k2
                    && buffers == r2
                    && bindings.len() == b2.len()
                    && scalars.len() == s2.len()
                    && scalars
                        .iter()
                        .zip(s2)
                        .all(|(a, b)| a.dtype() == b.dtype() && a.to_bits() == b.to_bits());
                if !same {
                    return None;
                }
                let mut moves = Vec::new();
                for (i, (a, b)) in bindings.iter().zip(b2).enumerate() {
                    let (na, nb) = (numbers(a), numbers(b));
                    if na.len() != nb.len() || kind_of(a) != kind_of(b) {
                        return None;
                    }
                    for (field, (x, y)) in na.iter().zip(&nb).enumerate() {
                        let delta = i64::try_from(y - x).ok()?;
                        if delta != 0 {
                            moves.push((i, field, delta));
                        }
                    }
                }
                Some(moves)
            }
            // A buffer the step allocates, and a copy, may grow by a fixed amount a step
            // (a temporary of a view that grows): their size is number 0 of "binding" 0.
            (
                Alloc { bytes, uninit },
                Alloc {
                    bytes: b2,
                    uninit: u2,
                },
            ) => (uninit == u2).then(|| size_move(*bytes, *b2)).flatten(),
            (Free(a), Free(b)) => (a == b).then(Vec::new),
            (
                Write {
                    buffer,
                    offset,
                    data,
                },
                Write {
                    buffer: b2,
                    offset: o2,
                    data: d2,
                },
            ) => (buffer == b2 && offset == o2 && data == d2).then(Vec::new),
            (
                Copy { from, to, bytes },
                Copy {
                    from: f2,
                    to: t2,
                    bytes: n2,
                },
            ) => (from == f2 && to == t2)
                .then(|| size_move(*bytes, *n2))
                .flatten(),
            (SoleLaunch(a), SoleLaunch(b)) => (a == b).then(Vec::new),
            (TakeReductions, TakeReductions) => Some(Vec::new()),
            (Fold(a), Fold(b)) => (a == b).then(Vec::new),
            (FinishDeferred(a), FinishDeferred(b)) => (a == b).then(Vec::new),
            _ => None,
        }
    }
}

/// The move of a size (an allocation's or a copy's bytes) from `a` to `b`, as
/// [`Event::moves_to`] gives moves: none where they are equal.
fn size_move(a: u64, b: u64) -> Option<Vec<(usize, usize, i64)>> {
    let delta = i64::try_from(i128::from(b) - i128::from(a)).ok()?;
    Some(if delta == 0 {
        Vec::new()
    } else {
        vec![(0, 0, delta)]
    })
}

/// The size `bytes` moved by `delta` bytes a step, `after` steps on; `None` where it leaves
/// `u64`.
fn moved_size(bytes: u64, delta: i64, after: u64) -> Option<u64> {
    let to = i128::from(bytes) + i128::from(delta) * i128::from(after);
    u64::try_from(to).ok()
}

/// A number of a binding that moves by the same amount every step: launch event `event`,
/// binding `binding`, number `field` in [`each_number`]'s order, `delta` a step.
/// `base` and `at` are filled in by [`Trace::follows`] and take no part in comparisons.
#[derive(Clone, Copy, Debug)]
struct Move {
    event: usize,
    binding: usize,
    field: usize,
    delta: i64,
    /// The number in the trace's own recording.
    base: i128,
    /// Where the number lies in its binding.
    at: Field,
}

impl PartialEq for Move {
    fn eq(&self, other: &Move) -> bool {
        (self.event, self.binding, self.field, self.delta)
            == (other.event, other.binding, other.field, other.delta)
    }
}

/// Where a number lies in a binding (see [`each_number`]): a replay sets it there at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Offset,
    Extent(usize),
    Stride(usize),
    Origin(usize),
    View(usize),
    Deferred,
}

impl Field {
    /// Number `field` of `b`, in [`each_number`]'s order.
    fn of(b: &Binding, field: usize) -> Option<Field> {
        let (buffer, rank, view, deferred) = match b {
            Binding::Buffer {
                extents,
                view,
                deferred,
                ..
            } => (true, extents.len(), view.len(), deferred.is_some()),
            Binding::Scratch { extents, view, .. } => (false, extents.len(), view.len(), false),
        };
        let mut f = field;
        if buffer {
            if f == 0 {
                return Some(Field::Offset);
            }
            f -= 1;
        }
        let groups: &[fn(usize) -> Field] = if buffer {
            &[Field::Extent, Field::Stride, Field::Origin]
        } else {
            &[Field::Extent, Field::Origin]
        };
        for make in groups {
            if f < rank {
                return Some(make(f));
            }
            f -= rank;
        }
        if f < view {
            return Some(Field::View(f));
        }
        (deferred && f == view).then_some(Field::Deferred)
    }

    /// Sets this number of `b` to `to`; `None` where `b` has no such number or `to` does not
    /// fit its type.
    fn set(self, b: &mut Binding, to: i128) -> Option<()> {
        let signed = |v: &mut i64| -> Option<()> {
            *v = i64::try_from(to).ok()?;
            Some(())
        };
        let unsigned = |v: &mut u64| -> Option<()> {
            *v = u64::try_from(to).ok()?;
            Some(())
        };
        match (b, self) {
            (Binding::Buffer { offset, .. }, Field::Offset) => unsigned(offset),
            (
                Binding::Buffer { extents, .. } | Binding::Scratch { extents, .. },
                Field::Extent(d),
            ) => signed(extents.get_mut(d)?),
            (Binding::Buffer { strides, .. }, Field::Stride(d)) => signed(strides.get_mut(d)?),
            (
                Binding::Buffer { origin, .. } | Binding::Scratch { origin, .. },
                Field::Origin(d),
            ) => signed(origin.get_mut(d)?),
            (Binding::Buffer { view, .. } | Binding::Scratch { view, .. }, Field::View(d)) => {
                unsigned(view.get_mut(d)?)
            }
            (Binding::Buffer { deferred, .. }, Field::Deferred) => {
                *deferred.as_mut()? = u32::try_from(to).ok()?;
                Some(())
            }
            _ => None,
        }
    }
}

/// What no step may change of a binding: whether it is scratch, its rank, its element size,
/// and whether its stores are deferred.
fn kind_of(b: &Binding) -> (bool, usize, usize, bool) {
    match b {
        Binding::Buffer {
            extents,
            element_size,
            deferred,
            ..
        } => (false, extents.len(), *element_size, deferred.is_some()),
        Binding::Scratch {
            extents,
            element_size,
            ..
        } => (true, extents.len(), *element_size, false),
    }
}

/// One number of a binding, in place (see [`each_number`]).
enum Number<'a> {
    Unsigned(&'a mut u64),
    Signed(&'a mut i64),
    Rows(&'a mut u32),
}

impl Number<'_> {
    fn get(&self) -> i128 {
        match self {
            Number::Unsigned(v) => i128::from(**v),
            Number::Signed(v) => i128::from(**v),
            Number::Rows(v) => i128::from(**v),
        }
    }
}

/// Calls `f` on each number of a binding, in order: for a buffer its offset, extents,
/// strides, origin, view and deferred rows; for scratch its extents, origin and view.
fn each_number(b: &mut Binding, mut f: impl FnMut(Number<'_>)) {
    match b {
        Binding::Buffer {
            offset,
            extents,
            strides,
            origin,
            view,
            deferred,
            ..
        } => {
            f(Number::Unsigned(offset));
            extents
                .iter_mut()
                .chain(strides.iter_mut())
                .chain(origin.iter_mut())
                .for_each(|v| f(Number::Signed(v)));
            view.iter_mut().for_each(|v| f(Number::Unsigned(v)));
            deferred.iter_mut().for_each(|v| f(Number::Rows(v)));
        }
        Binding::Scratch {
            extents,
            origin,
            view,
            ..
        } => {
            extents
                .iter_mut()
                .chain(origin.iter_mut())
                .for_each(|v| f(Number::Signed(v)));
            view.iter_mut().for_each(|v| f(Number::Unsigned(v)));
        }
    }
}

/// A binding's numbers, in [`each_number`]'s order.
fn numbers(b: &Binding) -> Vec<i128> {
    let mut n = Vec::new();
    each_number(&mut b.clone(), |v| n.push(v.get()));
    n
}

/// The back-end work of one step (see the module documentation), and the numbers of its
/// bindings that move from step to step.
#[derive(Clone, Debug)]
pub struct Trace {
    events: Vec<Event>,
    /// The kernels the step launched, each once: a replay runs only while every one of them
    /// is prepared (a bounded cache may have evicted one).
    kernels: Vec<Arc<KernelEntry>>,
    launches: usize,
    /// Numbers of bindings that move by a fixed amount each step (see [`Trace::follows`]).
    moves: Vec<Move>,
    /// The core that recorded it: its buffer ids mean nothing to another.
    core: Arc<crate::handle::CoreToken>,
    /// Per event, the bindings of a launch whose numbers move (or that names buffers the step
    /// allocates) as the last replay made them: a replay sets the numbers that move and the
    /// buffers, and copies nothing else.
    moved: RefCell<Vec<Option<Vec<Binding>>>>,
}

impl Trace {
    /// The launches a replay makes.
    pub fn launches(&self) -> usize {
        self.launches
    }

    /// The moves from `self` to `next`, a trace of the step after it: `None` unless `next`
    /// makes the same calls up to the numbers of its bindings (and, for buffers the step
    /// allocated, up to their ids).
    fn moves_to(&self, next: &Trace) -> Option<Vec<Move>> {
        if self.events.len() != next.events.len() {
            return None;
        }
        let mut moves = Vec::new();
        for (event, (a, b)) in self.events.iter().zip(&next.events).enumerate() {
            for (binding, field, delta) in a.moves_to(b)? {
                moves.push(Move {
                    event,
                    binding,
                    field,
                    delta,
                    base: 0,
                    at: Field::Offset,
                });
            }
        }
        Some(moves)
    }

    /// `next` as a trace to replay, where it follows `self` (the trace of the step before it)
    /// as `self` followed `earlier` (the one before that, if any): the same calls, every
    /// number of every binding changed by the same amount from one to the next. Replaying the
    /// result `k` steps after `next`'s moves each such number `k` times further. With nothing
    /// moving, `earlier` is not needed: `next` makes the same calls as `self`.
    pub fn follows(&self, earlier: Option<&Trace>, next: &Trace) -> Option<Trace> {
        if !Arc::ptr_eq(&self.core, &next.core) {
            return None;
        }
        let mut moves = self.moves_to(next)?;
        if !moves.is_empty() && earlier?.moves_to(self)? != moves {
            return None;
        }
        // Each moving number of a launch: where it lies, and its value in `next`.
        for m in &mut moves {
            if let Some(Event::Launch { bindings, .. }) = next.events.get(m.event) {
                let b = bindings.get(m.binding)?;
                m.at = Field::of(b, m.field)?;
                m.base = numbers(b).get(m.field).copied()?;
            }
        }
        Some(Trace {
            moves,
            moved: RefCell::default(),
            ..next.clone()
        })
    }
}

/// What a [`Recorder`] saw so far.
#[derive(Default)]
struct Log {
    events: Vec<Event>,
    kernels: Vec<Arc<KernelEntry>>,
    /// Each slot's buffer while it is allocated.
    slots: Vec<Option<BufferId>>,
    /// Why the step gives no trace, once something shows it.
    refused: Option<&'static str>,
    /// Whether the executor is folding partial reductions (see [`Recording::begin_fold`]):
    /// its reads and writes are the fold's.
    folding: bool,
    /// Whether partials were taken that no fold has taken up yet.
    partials: bool,
}

impl Log {
    fn name(&self, buffer: BufferId) -> BufRef {
        match self.slots.iter().position(|s| *s == Some(buffer)) {
            Some(n) => BufRef::Slot(n),
            None => BufRef::Fixed(buffer),
        }
    }

    fn refuse(&mut self, why: &'static str) {
        self.refused.get_or_insert(why);
    }
}

/// The back end a [`Recorder`] runs on, and what it saw.
struct Shared {
    inner: Box<dyn Backend>,
    log: Log,
}

/// A back end that runs everything on another one and logs it (see the module
/// documentation). The recorded back end and the log sit in a cell that the core shares, so
/// that the core takes the back end back when the recording ends.
struct Recorder(Rc<RefCell<Shared>>);

impl Recorder {
    /// Allocates a buffer on the recorded back end (zeroed unless `uninit`) as the step's
    /// next slot.
    fn record_alloc(&mut self, bytes: u64, uninit: bool) -> Result<BufferId> {
        let mut s = self.lock();
        let b = if uninit {
            s.inner.alloc_uninit(bytes)?
        } else {
            s.inner.alloc(bytes)?
        };
        s.log.events.push(Event::Alloc { bytes, uninit });
        s.log.slots.push(Some(b));
        Ok(b)
    }

    /// The shared state; the core touches it only once the recorder is gone, and no call
    /// here holds it across another, so it is never borrowed twice.
    fn lock(&self) -> RefMut<'_, Shared> {
        self.0.borrow_mut()
    }
}

impl Backend for Recorder {
    fn name(&self) -> &'static str {
        self.lock().inner.name()
    }
    fn alloc(&mut self, bytes: u64) -> Result<BufferId> {
        self.record_alloc(bytes, false)
    }
    fn alloc_uninit(&mut self, bytes: u64) -> Result<BufferId> {
        self.record_alloc(bytes, true)
    }
    fn free(&mut self, buffer: BufferId) {
        let mut s = self.lock();
        s.inner.free(buffer);
        match s.log.name(buffer) {
            BufRef::Slot(n) => {
                s.log.slots[n] = None;
                s.log.events.push(Event::Free(BufRef::Slot(n)));
            }
            BufRef::Fixed(_) => s.log.refuse("it frees a buffer allocated before it"),
        }
    }
    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        let mut s = self.lock();
        s.inner.write(buffer, offset, data)?;
        if s.log.folding {
            return Ok(());
        }
        let buffer = s.log.name(buffer);
        s.log.events.push(Event::Write {
            buffer,
            offset,
            data: data.to_vec(),
        });
        Ok(())
    }
    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<()> {
        let mut s = self.lock();
        if !s.log.folding {
            s.log.refuse("it reads a store on the host");
        }
        s.inner.read(buffer, offset, out)
    }
    fn copy(&mut self, from: BufferId, to: BufferId, bytes: u64) -> Result<()> {
        let mut s = self.lock();
        s.inner.copy(from, to, bytes)?;
        let (from, to) = (s.log.name(from), s.log.name(to));
        s.log.events.push(Event::Copy { from, to, bytes });
        Ok(())
    }
    fn read_append(
        &mut self,
        buffer: BufferId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let mut s = self.lock();
        s.log.refuse("it reads a store on the host");
        s.inner.read_append(buffer, offset, len, out)
    }
    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool {
        // The executor asks before each task it runs: the step's kernels are those asked of.
        let mut s = self.lock();
        if !s.log.kernels.iter().any(|k| k.id() == kernel.id()) {
            s.log.kernels.push(Arc::clone(kernel));
        }
        s.inner.is_prepared(kernel)
    }
    fn prepare(&mut self, kernel: &Arc<KernelEntry>, owner: Owner) -> Result<Prepared> {
        self.lock().inner.prepare(kernel, owner)
    }
    fn launch(&mut self, kernel: KernelId, bindings: &[Binding], scalars: &[Scalar]) -> Result<()> {
        let mut s = self.lock();
        s.inner.launch(kernel, bindings, scalars)?;
        let buffers = bindings
            .iter()
            .map(|b| match b {
                Binding::Buffer { buffer, .. } => Some(s.log.name(*buffer)),
                Binding::Scratch { .. } => None,
            })
            .collect();
        s.log.events.push(Event::Launch {
            kernel,
            bindings: bindings.to_vec(),
            buffers,
            scalars: scalars.to_vec(),
        });
        Ok(())
    }
    fn take_reductions(&mut self) -> Result<Vec<LoopPartial>> {
        let mut s = self.lock();
        let parts = s.inner.take_reductions()?;
        if s.log.partials {
            s.log.refuse("it drops partial reductions");
        }
        if parts.is_empty() {
            s.log.events.push(Event::TakeReductions);
        } else {
            // A fold follows (`Recording::begin_fold`), or the step is not replayed.
            s.log.partials = true;
        }
        Ok(parts)
    }
    fn finish_deferred(&mut self, commit: bool) -> Result<()> {
        let mut s = self.lock();
        s.inner.finish_deferred(commit)?;
        s.log.events.push(Event::FinishDeferred(commit));
        Ok(())
    }
    fn set_sole_launch(&mut self, sole: bool) {
        let mut s = self.lock();
        s.inner.set_sole_launch(sole);
        s.log.events.push(Event::SoleLaunch(sole));
    }
    fn set_cancel(&mut self, token: Option<Arc<crate::CancelToken>>) {
        self.lock().inner.set_cancel(token);
    }
    fn synchronize(&mut self) -> Result<()> {
        self.lock().inner.synchronize()
    }
    fn memory(&self) -> MemoryStats {
        self.lock().inner.memory()
    }
    fn functions(&self) -> crate::backend::FunctionCounts {
        self.lock().inner.functions()
    }
    fn record_mark(&mut self) -> Result<Option<u64>> {
        let mut s = self.lock();
        s.log.refuse("it records device marks");
        s.inner.record_mark()
    }
    fn mark_elapsed(&mut self, from: u64, to: u64) -> Result<Option<std::time::Duration>> {
        self.lock().inner.mark_elapsed(from, to)
    }
    fn copy_bandwidth(&mut self, bytes: u64, samples: usize) -> Result<Option<Vec<f64>>> {
        let mut s = self.lock();
        s.log.refuse("it probes the device");
        s.inner.copy_bandwidth(bytes, samples)
    }
}

/// Stands in for the back end while the recorder is put in front of it or taken away; it is
/// never called.
struct Vacant;

impl Backend for Vacant {
    fn name(&self) -> &'static str {
        "vacant"
    }
    fn alloc(&mut self, _: u64) -> Result<BufferId> {
        Err(vacant())
    }
    fn free(&mut self, _: BufferId) {}
    fn write(&mut self, _: BufferId, _: u64, _: &[u8]) -> Result<()> {
        Err(vacant())
    }
    fn read(&mut self, _: BufferId, _: u64, _: &mut [u8]) -> Result<()> {
        Err(vacant())
    }
    fn is_prepared(&self, _: &Arc<KernelEntry>) -> bool {
        false
    }
    fn prepare(&mut self, _: &Arc<KernelEntry>, _: Owner) -> Result<Prepared> {
        Err(vacant())
    }
    fn launch(&mut self, _: KernelId, _: &[Binding], _: &[Scalar]) -> Result<()> {
        Err(vacant())
    }
    fn take_reductions(&mut self) -> Result<Vec<LoopPartial>> {
        Err(vacant())
    }
    fn synchronize(&mut self) -> Result<()> {
        Err(vacant())
    }
    fn memory(&self) -> MemoryStats {
        MemoryStats::default()
    }
}

fn vacant() -> Error {
    Error::Internal("the back end is out while a trace recorder is swapped in".into())
}

/// The recording in progress: what the recorder in front of the back end shares with the
/// core.
pub(crate) struct Recording(Rc<RefCell<Shared>>);

impl Recording {
    /// The executor folds the partials it just took into the targets of the last launch's
    /// bindings, through the back end, for `kernel`: a replay folds its own partials there.
    pub(crate) fn begin_fold(&self, kernel: &str) {
        let mut s = self.0.borrow_mut();
        s.log.partials = false;
        s.log.folding = true;
        s.log.events.push(Event::Fold(kernel.to_string()));
    }

    /// The fold [`Recording::begin_fold`] announced is over.
    pub(crate) fn end_fold(&self) {
        self.0.borrow_mut().log.folding = false;
    }
}

impl Core {
    /// Runs what is pending, then records the back-end work from here to
    /// [`Core::end_trace`] (see the module documentation). On several ranks nothing is
    /// recorded and `end_trace` gives no trace. Inside a recording (a repeated loop inside
    /// another's step) nothing new begins: the matching `end_trace` gives no trace and the
    /// outer recording goes on.
    pub fn begin_trace(&mut self) -> Result<()> {
        self.flush()?;
        if self.recording.is_some() {
            self.nested_traces += 1;
            return Ok(());
        }
        if self.distribution.is_some() {
            return Ok(());
        }
        let inner = std::mem::replace(&mut self.backend, Box::new(Vacant));
        let shared = Rc::new(RefCell::new(Shared {
            inner,
            log: Log::default(),
        }));
        self.backend = Box::new(Recorder(Rc::clone(&shared)));
        self.recording = Some(Recording(shared));
        Ok(())
    }

    /// Runs what is pending and frees what the step released, then stops recording: the
    /// step's trace, or `None` where the step cannot be replayed (see the module
    /// documentation). The back end is the one before [`Core::begin_trace`] again, also when
    /// this fails.
    pub fn end_trace(&mut self) -> Result<Option<Trace>> {
        if self.recording.is_none() || self.nested_traces > 0 {
            self.nested_traces = self.nested_traces.saturating_sub(1);
            self.flush()?;
            return Ok(None);
        }
        // The step's last window runs while the recording is still the core's (its folds
        // are announced to it).
        self.collect_released();
        let flushed = self.flush();
        self.collect_released();
        let Some(Recording(shared)) = self.recording.take() else {
            return Err(Error::Internal("a trace recording went missing".into()));
        };
        // Dropping the recorder leaves the core the only holder of the shared state.
        drop(std::mem::replace(&mut self.backend, Box::new(Vacant)));
        let Shared { inner, log } = match Rc::try_unwrap(shared) {
            Ok(shared) => shared.into_inner(),
            Err(_) => return Err(Error::Internal("a trace recorder outlived its step".into())),
        };
        self.backend = inner;
        flushed?;
        if log.refused.is_some() || log.partials || log.slots.iter().any(Option::is_some) {
            return Ok(None);
        }
        let launches = log
            .events
            .iter()
            .filter(|e| matches!(e, Event::Launch { .. }))
            .count();
        Ok(Some(Trace {
            events: log.events,
            kernels: log.kernels,
            launches,
            moves: Vec::new(),
            core: Arc::clone(&self.token),
            moved: RefCell::default(),
        }))
    }

    /// Makes the back-end calls of `trace` again (see the module documentation), as the step
    /// `after` steps after the recorded one (its moving bindings moved `after` times):
    /// `Ok(false)`, having done nothing, where a kernel of the trace is no longer prepared
    /// (the caller then runs the step itself). The trace must come from [`Core::end_trace`]
    /// (or [`Trace::follows`]) on this core; what is pending runs first.
    pub fn replay(&mut self, trace: &Trace, after: u64) -> Result<bool> {
        if !Arc::ptr_eq(&trace.core, &self.token) {
            return Err(Error::Usage(
                "a trace was replayed on another runtime than the one that recorded it: its \
                 buffers mean nothing there"
                    .into(),
            ));
        }
        self.flush()?;
        if self.recording.is_some() || !trace.kernels.iter().all(|k| self.backend.is_prepared(k)) {
            return Ok(false);
        }
        let mut slots: Vec<Option<BufferId>> = Vec::new();
        // Counted before it runs: a replay that fails part way has written stores too.
        self.stats.replays_begun += 1;
        let started = std::time::Instant::now();
        let result = self.replay_events(trace, after, &mut slots);
        self.stats.replay_seconds += started.elapsed().as_secs_f64();
        // On a failure, what the step allocated and did not free yet goes back.
        for b in slots.into_iter().flatten() {
            self.backend.free(b);
        }
        result?;
        self.stats.steps_replayed += 1;
        self.stats.launches_replayed += trace.launches as u64;
        Ok(true)
    }

    fn replay_events(
        &mut self,
        trace: &Trace,
        after: u64,
        slots: &mut Vec<Option<BufferId>>,
    ) -> Result<()> {
        let resolve = |slots: &[Option<BufferId>], r: BufRef| match r {
            BufRef::Fixed(b) => Ok(b),
            BufRef::Slot(n) => slots.get(n).copied().flatten().ok_or_else(|| {
                Error::Internal(format!("a trace names buffer slot {n} while it is free"))
            }),
        };
        let mut moves = trace.moves.iter().peekable();
        let folds = trace.events.iter().any(|e| matches!(e, Event::Fold(_)));
        // The bindings of the last launch, for a fold that follows it.
        let mut last: Vec<Binding> = Vec::new();
        for (at, event) in trace.events.iter().enumerate() {
            match event {
                Event::Alloc { bytes, uninit } => {
                    let bytes = replayed_size(&mut moves, at, *bytes, after)?;
                    let b = if *uninit {
                        self.backend.alloc_uninit(bytes)?
                    } else {
                        self.backend.alloc(bytes)?
                    };
                    slots.push(Some(b));
                }
                Event::Free(r) => {
                    let b = resolve(slots, *r)?;
                    self.backend.free(b);
                    if let BufRef::Slot(n) = r {
                        slots[*n] = None;
                    }
                }
                Event::Write {
                    buffer,
                    offset,
                    data,
                } => {
                    let b = resolve(slots, *buffer)?;
                    self.backend.write(b, *offset, data)?;
                }
                Event::Copy { from, to, bytes } => {
                    let bytes = replayed_size(&mut moves, at, *bytes, after)?;
                    let (f, t) = (resolve(slots, *from)?, resolve(slots, *to)?);
                    self.backend.copy(f, t, bytes)?;
                }
                Event::SoleLaunch(sole) => self.backend.set_sole_launch(*sole),
                Event::Launch {
                    kernel,
                    bindings,
                    buffers,
                    scalars,
                } => {
                    let moved = moves.peek().is_some_and(|m| m.event == at);
                    if moved || buffers.iter().any(|b| matches!(b, Some(BufRef::Slot(_)))) {
                        let mut cache = trace.moved.borrow_mut();
                        if cache.len() < trace.events.len() {
                            cache.resize_with(trace.events.len(), || None);
                        }
                        let bound = cache[at].get_or_insert_with(|| bindings.clone());
                        for (binding, r) in bound.iter_mut().zip(buffers) {
                            if let (Binding::Buffer { buffer, .. }, Some(r)) = (binding, r) {
                                *buffer = resolve(slots, *r)?;
                            }
                        }
                        while let Some(m) = moves.next_if(|m| m.event == at) {
                            let by = i128::from(m.delta) * i128::from(after);
                            let set = bound
                                .get_mut(m.binding)
                                .and_then(|b| m.at.set(b, m.base.checked_add(by)?));
                            if set.is_none() {
                                return Err(Error::Usage(format!(
                                    "a replayed step's view moved out of its store (step \
                                     {after} after the recorded one)"
                                )));
                            }
                        }
                        self.backend.launch(*kernel, bound, scalars)?;
                        if folds {
                            last.clone_from(bound);
                        }
                    } else {
                        self.backend.launch(*kernel, bindings, scalars)?;
                        if folds {
                            last.clone_from(bindings);
                        }
                    }
                }
                Event::Fold(kernel) => {
                    let held = self.backend.take_reductions()?;
                    crate::executor::fold_reductions(self.backend.as_mut(), kernel, &last, held)?;
                }
                Event::TakeReductions => {
                    if !self.backend.take_reductions()?.is_empty() {
                        return Err(Error::Internal(
                            "a replayed launch held back partial reductions that its recording \
                             did not"
                                .into(),
                        ));
                    }
                }
                Event::FinishDeferred(commit) => self.backend.finish_deferred(*commit)?,
            }
        }
        Ok(())
    }
}

/// The size of event `at` (an allocation's or a copy's bytes, recorded as `bytes`), `after`
/// steps past the recorded one: moved where the trace moves it.
fn replayed_size(
    moves: &mut std::iter::Peekable<std::slice::Iter<'_, Move>>,
    at: usize,
    bytes: u64,
    after: u64,
) -> Result<u64> {
    match moves.next_if(|m| m.event == at) {
        None => Ok(bytes),
        Some(m) => moved_size(bytes, m.delta, after).ok_or_else(|| {
            Error::Usage(format!(
                "a replayed step's buffer size left the range of sizes (step {after} after the \
                 recorded one)"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bindings() -> Vec<Binding> {
        vec![
            Binding::Buffer {
                buffer: BufferId(3),
                offset: 7,
                extents: crate::smallvec::smallvec![4, 5],
                strides: crate::smallvec::smallvec![5, 1],
                origin: crate::smallvec::smallvec![2, 0],
                view: crate::smallvec::smallvec![9, 5],
                element_size: 8,
                deferred: Some(1),
            },
            Binding::Buffer {
                buffer: BufferId(4),
                offset: 0,
                extents: crate::smallvec::smallvec![6],
                strides: crate::smallvec::smallvec![-1],
                origin: crate::smallvec::smallvec![0],
                view: crate::smallvec::smallvec![6],
                element_size: 4,
                deferred: None,
            },
            Binding::Scratch {
                extents: crate::smallvec::smallvec![2, 3, 4],
                origin: crate::smallvec::smallvec![0, 1, 2],
                view: crate::smallvec::smallvec![2, 6, 8],
                element_size: 8,
            },
        ]
    }

    /// Every number a replay may move is set where `each_number` finds it, and nothing else
    /// changes.
    #[test]
    fn a_field_sets_the_number_each_number_names() {
        for b in bindings() {
            let before = numbers(&b);
            for (field, old) in before.iter().enumerate() {
                let at = Field::of(&b, field).expect("a field for every number");
                let mut moved = b.clone();
                at.set(&mut moved, old + 2).expect("sets");
                let mut want = before.clone();
                want[field] += 2;
                assert_eq!(numbers(&moved), want, "field {field} ({at:?}) of {b:?}");
            }
            assert_eq!(
                Field::of(&b, before.len()),
                None,
                "past the last number of {b:?}"
            );
            let mut moved = b.clone();
            let at = Field::of(&b, 0).expect("a first number");
            assert_eq!(
                at.set(&mut moved, -1i128 << 80),
                None,
                "a number that does not fit"
            );
        }
    }
}
