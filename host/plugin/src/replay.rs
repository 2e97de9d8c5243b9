//! Recorded plugin calls, replayed without entering the plugin.
//!
//! A call into a plugin is a function of what the plugin observes: its arguments, and the
//! answers the host's imports give it (a store's shape and dtype, whether two stores overlap,
//! the preferred tiling, ...). A plugin whose interface promises that it keeps no state that
//! changes what it submits (the `numeric` interface does) makes, for the same observations,
//! the same import calls. So a call can be recorded once, as the list of import calls it made
//! in terms of *slots* (the stores lent to it, then the stores and views it made), and later
//! replayed against other arguments by the host alone: each view and store is made again, each
//! task submitted again, and each observation answered again and compared with the recorded
//! answer. Any difference, or any error from the host, is a [`Miss`]: what the replay did is
//! undone (its stores released, its tasks dropped) and the caller makes the real call.
//!
//! Replayed tasks go through [`Core::submit`] and every check it makes, like the plugin's own;
//! the replay only skips the Wasm boundary and the plugin's own work. A call that reads data
//! (`read-bytes`), keeps a handle past the call, or uses a handle the call did not get is not
//! recorded. A call that uploads data (`store-from-bytes`) is recorded with what it uploaded:
//! the bytes are a function of what the call observed, as the rest of it is (a reduction's
//! output made holding its identity, which every `dot` and `sum` makes). Bytes that repeat
//! one element are recorded as that element, at any size; others whole, up to [`MAX_BYTES`]
//! for the call, past which the call is not recorded.

use std::collections::HashMap;
use std::sync::Arc;

use weft_ir::{DType, Privilege, Scalar};
use weft_runtime::partition::{Partition, Tiling};
use weft_runtime::{Core, IndexTask, KernelEntry, PluginId, StoreId, TaskArg};

/// The most import calls a recorded call may make: a call that makes more is not recorded,
/// so that a plugin cannot fill the host's memory with recordings.
pub const MAX_EVENTS: usize = 1024;

/// The most bytes a recorded call may upload (`store-from-bytes`), all its uploads together:
/// a call that uploads more is not recorded, so that recordings stay small.
pub const MAX_BYTES: usize = 4096;

/// A store of a recorded call: the `n`-th lent argument, then the stores and views the call
/// made, in the order it made them.
pub type Slot = u32;

/// The stores of a replay by slot (and whether each is alive): inline for the calls that
/// make a few, as nearly all do, so that a replay does not allocate for them.
type Slots<T> = weft_runtime::smallvec::SmallVec<[T; 16]>;

/// A view the plugin made of a store, with what it made it from.
#[derive(Clone, Debug, PartialEq)]
pub enum ViewOp {
    /// `slice(start, stop)`.
    Slice(Vec<u64>, Vec<u64>),
    /// `strided(start, step, shape)`.
    Strided(Vec<u64>, Vec<i64>, Vec<u64>),
    /// `permute(axes)`.
    Permute(Vec<u32>),
    /// `broadcast-to(shape)`.
    Broadcast(Vec<u64>),
}

/// One import call of a recorded plugin call, with what it answered.
#[derive(Clone, Debug)]
pub enum Event {
    /// `store.shape()` answered `shape`.
    Shape(Slot, Vec<u64>),
    /// `store.dtype()` answered `dtype`.
    Dtype(Slot, DType),
    /// A view of a slot: the next slot.
    View(Slot, ViewOp),
    /// `store.reshape(shape)`: the next slot when it made a view (`true`), nothing otherwise.
    Reshape(Slot, Vec<u64>, bool),
    /// `may-overlap(a, b)` answered this.
    MayOverlap(Slot, Slot, bool),
    /// `same-root(a, b)` answered this.
    SameRoot(Slot, Slot, bool),
    /// The plugin dropped its handle to a slot it made.
    Drop(Slot),
    /// `create-store(shape, dtype)`: the next slot.
    Create(Vec<u64>, DType),
    /// `store-from-bytes(shape, dtype, bytes)`: the next slot.
    FromBytes(Vec<u64>, DType, Vec<u8>),
    /// `store-from-bytes(shape, dtype, bytes)` with `bytes` one element repeated: the next
    /// slot.
    Fill(Vec<u64>, DType, Vec<u8>),
    /// `preferred-tiling(shape)` answered this launch and tiling.
    Tiling(Vec<u64>, weft_runtime::Dims<u64>, Tiling),
    /// A task submitted.
    Submit(Box<SubmitEvent>),
}

/// A submitted task, its stores named by slot.
#[derive(Clone, Debug)]
pub struct SubmitEvent {
    /// The kernel, as the core resolved it for the plugin.
    pub kernel: Arc<KernelEntry>,
    /// The launch domain.
    pub launch: weft_runtime::Dims<u64>,
    /// The arguments: slot, partition and privilege.
    pub args: Vec<(Slot, Partition, Privilege)>,
    /// The scalars.
    pub scalars: Vec<Scalar>,
}

/// A call being recorded: the plugin's handle numbers mapped to slots, and the events so far.
/// Installed in [`crate::PluginState::recorder`] for one call.
#[derive(Debug, Default)]
pub struct Recorder {
    slots: HashMap<u32, Slot>,
    lent: Vec<StoreId>,
    made: Slot,
    dropped: Vec<bool>,
    events: Vec<Event>,
    result: Option<Slot>,
    spoiled: bool,
    /// The bytes uploaded so far ([`MAX_BYTES`] at most).
    uploaded: usize,
}

impl Recorder {
    /// The slot of the plugin's handle `rep`, or `None` (and the recording is spoiled) for a
    /// handle this call did not get or make.
    pub(crate) fn slot(&mut self, rep: u32) -> Option<Slot> {
        let slot = self.slots.get(&rep).copied();
        if slot.is_none() {
            self.spoiled = true;
        }
        slot
    }

    /// A store lent to the call as its next argument, under handle `rep`.
    pub(crate) fn lend(&mut self, rep: u32, id: StoreId) {
        if self.made > 0 {
            // Arguments come before anything the call makes.
            self.spoiled = true;
        }
        self.slots.insert(rep, self.lent.len() as Slot);
        self.lent.push(id);
    }

    /// A store or view the call made, under handle `rep`: its event, then the new slot.
    pub(crate) fn made(&mut self, rep: u32, event: Event) {
        let slot = (self.lent.len() as Slot) + self.made;
        self.made += 1;
        self.dropped.push(false);
        self.slots.insert(rep, slot);
        self.push(event);
    }

    /// A store the call uploaded `bytes` into, under handle `rep`. Bytes that repeat one
    /// element (a reduction's output holding its identity) are recorded as that element, at
    /// any size; other bytes are recorded whole up to [`MAX_BYTES`] for the call, past which the
    /// recording is spoiled instead.
    pub(crate) fn uploaded(&mut self, rep: u32, shape: Vec<u64>, dtype: DType, bytes: Vec<u8>) {
        let size = dtype.size();
        let first = bytes.get(..size);
        let uniform = first.is_some_and(|one| bytes.chunks(size).all(|c| c == one));
        let event = match first {
            Some(one) if uniform => Event::Fill(shape, dtype, one.to_vec()),
            _ => {
                self.uploaded = self.uploaded.saturating_add(bytes.len());
                if self.uploaded > MAX_BYTES {
                    self.spoiled = true;
                    return;
                }
                Event::FromBytes(shape, dtype, bytes)
            }
        };
        self.made(rep, event);
    }

    /// An event that makes nothing.
    pub(crate) fn push(&mut self, event: Event) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(event);
        } else {
            self.spoiled = true;
        }
    }

    /// The plugin dropped handle `rep`.
    pub(crate) fn drop_handle(&mut self, rep: u32) {
        let Some(slot) = self.slot(rep) else {
            return;
        };
        self.slots.remove(&rep);
        match slot.checked_sub(self.lent.len() as Slot) {
            Some(made) => {
                self.dropped[made as usize] = true;
                self.push(Event::Drop(slot));
            }
            // A lent handle is a borrow: the plugin cannot drop it.
            None => self.spoiled = true,
        }
    }

    /// The call returned handle `rep` as its result.
    pub(crate) fn returned(&mut self, rep: u32) {
        match self.slot(rep) {
            Some(slot) if slot >= self.lent.len() as Slot && self.result.is_none() => {
                self.slots.remove(&rep);
                self.result = Some(slot);
            }
            _ => self.spoiled = true,
        }
    }

    /// The call cannot be replayed (it read or uploaded data).
    pub(crate) fn spoil(&mut self) {
        self.spoiled = true;
    }

    /// The recording, if the call can be replayed: it was lent exactly `args`, in order, and
    /// every store it made was dropped or returned.
    pub fn finish(self, args: &[StoreId]) -> Option<Recording> {
        let lent = self.lent.len() as Slot;
        let all_gone = self
            .dropped
            .iter()
            .enumerate()
            .all(|(i, &d)| d || self.result == Some(lent + i as Slot));
        (!self.spoiled && self.lent == args && all_gone).then_some(Recording {
            args: lent,
            events: self.events,
            result: self.result,
        })
    }
}

/// A call that can be replayed (see the module documentation).
#[derive(Clone, Debug)]
pub struct Recording {
    args: Slot,
    events: Vec<Event>,
    result: Option<Slot>,
}

/// A replay that did not match the recording, or that the host refused: the caller makes the
/// real call. Everything the replay did was undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss;

/// The plugin a replay acts for: the owner, name and quota of the stores it makes.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The plugin's id.
    pub id: PluginId,
    /// Its name.
    pub name: &'a str,
    /// The most bytes its stores may hold at once.
    pub quota: u64,
}

impl Recording {
    /// How many events it holds (its size, for a bounded memo).
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether it holds no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Replays the call with `args` as its lent stores. Returns the store the call returns
    /// (its one count now the caller's), or `None` for a call that returns none.
    pub fn replay(
        &self,
        core: &mut Core,
        caller: Caller<'_>,
        args: &[StoreId],
    ) -> Result<Option<StoreId>, Miss> {
        if args.len() != self.args as usize {
            return Err(Miss);
        }
        let mark = core.next_seq();
        let mut slots: Slots<StoreId> = Slots::from_slice(args);
        let mut live: Slots<bool> = weft_runtime::smallvec::smallvec![false; args.len()];
        let outcome = self.run(core, caller, &mut slots, &mut live);
        if outcome.is_err() {
            core.truncate_window(mark);
            for (slot, alive) in slots.iter().zip(&live) {
                if *alive {
                    core.release(*slot);
                }
            }
            return Err(Miss);
        }
        self.result.map(|r| id(&slots, r)).transpose()
    }

    /// Replays the events in two passes: first everything the plugin observed and made
    /// (views, stores, and every answer compared), then, once all matched, its tasks and its
    /// drops in their order. So a replay that misses has submitted nothing, unless the core
    /// refuses a task that it took from the plugin itself.
    fn run(
        &self,
        core: &mut Core,
        caller: Caller<'_>,
        slots: &mut Slots<StoreId>,
        live: &mut Slots<bool>,
    ) -> Result<(), Miss> {
        for event in &self.events {
            observe(core, caller, event, slots, live)?;
        }
        for event in &self.events {
            act(core, caller, event, slots, live)?;
        }
        Ok(())
    }
}

/// The store of slot `s` so far.
fn id(slots: &[StoreId], s: Slot) -> Result<StoreId, Miss> {
    slots.get(s as usize).copied().ok_or(Miss)
}

/// The first pass of a replay: makes what `event` made and checks what it answered; leaves
/// tasks and drops to [`act`].
fn observe(
    core: &mut Core,
    caller: Caller<'_>,
    event: &Event,
    slots: &mut Slots<StoreId>,
    live: &mut Slots<bool>,
) -> Result<(), Miss> {
    let same = |ok: bool| if ok { Ok(()) } else { Err(Miss) };
    match event {
        Event::Shape(s, shape) => {
            let info = core.stores().get(id(slots, *s)?).map_err(|_| Miss)?;
            same(info.shape == *shape)
        }
        Event::Dtype(s, dtype) => {
            let info = core.stores().get(id(slots, *s)?).map_err(|_| Miss)?;
            same(info.dtype == *dtype)
        }
        Event::View(s, op) => {
            let view = make_view(core, id(slots, *s)?, op).map_err(|_| Miss)?;
            slots.push(view);
            live.push(true);
            Ok(())
        }
        Event::Reshape(s, shape, made) => {
            let view = core.reshape(id(slots, *s)?, shape).map_err(|_| Miss)?;
            if let Some(view) = view {
                slots.push(view);
                live.push(true);
            }
            same(view.is_some() == *made)
        }
        Event::MayOverlap(a, b, answer) => {
            let got = may_overlap(core, id(slots, *a)?, id(slots, *b)?).map_err(|_| Miss)?;
            same(got == *answer)
        }
        Event::SameRoot(a, b, answer) => {
            let got = same_root(core, id(slots, *a)?, id(slots, *b)?).map_err(|_| Miss)?;
            same(got == *answer)
        }
        Event::Create(shape, dtype) => {
            let made = core
                .create_store_as(caller.id, caller.name, caller.quota, shape.clone(), *dtype)
                .map_err(|_| Miss)?;
            slots.push(made);
            live.push(true);
            Ok(())
        }
        Event::FromBytes(shape, dtype, bytes) => {
            let made = core
                .store_from_bytes_as(
                    Some((caller.id, caller.name, caller.quota)),
                    shape.clone(),
                    *dtype,
                    bytes,
                )
                .map_err(|_| Miss)?;
            slots.push(made);
            live.push(true);
            Ok(())
        }
        Event::Fill(shape, dtype, element) => {
            // The real call uploaded as many bytes, within its quota.
            let count = shape.iter().try_fold(1usize, |n, &d| {
                usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
            });
            let bytes = element.repeat(count.ok_or(Miss)?);
            let made = core
                .store_from_bytes_as(
                    Some((caller.id, caller.name, caller.quota)),
                    shape.clone(),
                    *dtype,
                    &bytes,
                )
                .map_err(|_| Miss)?;
            slots.push(made);
            live.push(true);
            Ok(())
        }
        Event::Tiling(shape, launch, tiling) => {
            let (l, t) = core.preferred_tiling(shape);
            same(l == *launch && t == *tiling)
        }
        Event::Drop(_) | Event::Submit(_) => Ok(()),
    }
}

/// The second pass of a replay: submits `event`'s task, or releases the store it dropped.
fn act(
    core: &mut Core,
    caller: Caller<'_>,
    event: &Event,
    slots: &[StoreId],
    live: &mut [bool],
) -> Result<(), Miss> {
    match event {
        Event::Drop(s) => {
            let i = *s as usize;
            if !live.get(i).copied().unwrap_or(false) {
                return Err(Miss);
            }
            live[i] = false;
            core.release(slots[i]);
            Ok(())
        }
        Event::Submit(task) => {
            let mut args = Vec::with_capacity(task.args.len());
            for (s, partition, privilege) in &task.args {
                args.push(TaskArg::new(id(slots, *s)?, partition.clone(), *privilege));
            }
            let task = IndexTask::new(
                caller.id,
                Arc::clone(&task.kernel),
                task.launch.clone(),
                args,
                task.scalars.clone(),
            );
            core.submit(task).map_err(|_| Miss)
        }
        _ => Ok(()),
    }
}

/// Makes the view `op` of `parent`.
pub(crate) fn make_view(
    core: &mut Core,
    parent: StoreId,
    op: &ViewOp,
) -> weft_runtime::Result<StoreId> {
    match op {
        ViewOp::Slice(start, stop) => core.slice(parent, start, stop),
        ViewOp::Strided(start, step, shape) => core.view(parent, |m| m.strided(start, step, shape)),
        ViewOp::Permute(axes) => core.view(parent, |m| m.permute(axes)),
        ViewOp::Broadcast(shape) => core.view(parent, |m| m.broadcast_to(shape)),
    }
}

/// Whether stores `a` and `b` may share elements (the `may-overlap` import).
pub(crate) fn may_overlap(core: &Core, a: StoreId, b: StoreId) -> weft_runtime::Result<bool> {
    let stores = core.stores();
    let (a, b) = (stores.get(a)?, stores.get(b)?);
    let root = stores.storage(a.storage).map(|s| s.shape.as_slice());
    Ok(a.storage == b.storage && root.is_none_or(|root| a.map.may_overlap(&b.map, root)))
}

/// Whether stores `a` and `b` view one storage (the `same-root` import).
pub(crate) fn same_root(core: &Core, a: StoreId, b: StoreId) -> weft_runtime::Result<bool> {
    let stores = core.stores();
    Ok(stores.get(a)?.storage == stores.get(b)?.storage)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorder lent stores 7 and 8 (handles 1 and 2) that made a store (handle 3).
    fn recorder() -> Recorder {
        let mut r = Recorder::default();
        r.lend(1, StoreId(7));
        r.lend(2, StoreId(8));
        r.made(3, Event::Create(vec![4], DType::F64));
        r
    }

    #[test]
    fn an_upload_is_recorded_as_one_element_or_its_bytes_up_to_the_bound() {
        // One element repeated, at any size: the element.
        let mut r = recorder();
        let ones: Vec<u8> = (0..MAX_BYTES).flat_map(|_| 1f64.to_le_bytes()).collect();
        r.uploaded(4, vec![MAX_BYTES as u64], DType::F64, ones);
        r.drop_handle(3);
        r.returned(4);
        let rec = r.finish(&[StoreId(7), StoreId(8)]).expect("replayable");
        assert!(
            matches!(&rec.events[1], Event::Fill(shape, DType::F64, one) if shape == &[MAX_BYTES as u64] && one == &1f64.to_le_bytes())
        );
        // Distinct elements: the bytes, up to the bound for the whole call.
        let mut r = recorder();
        let distinct = |n: usize| -> Vec<u8> { (0..n as u32).flat_map(u32::to_le_bytes).collect() };
        r.uploaded(4, vec![4], DType::I32, distinct(4));
        r.drop_handle(3);
        r.returned(4);
        let rec = r.finish(&[StoreId(7), StoreId(8)]).expect("replayable");
        assert!(
            matches!(&rec.events[1], Event::FromBytes(shape, DType::I32, bytes) if shape == &[4] && bytes == &distinct(4))
        );
        let mut r = recorder();
        let half = (MAX_BYTES / 8) as u64;
        r.uploaded(4, vec![half], DType::I32, distinct(MAX_BYTES / 8));
        r.uploaded(5, vec![half], DType::I32, distinct(MAX_BYTES / 8));
        r.uploaded(6, vec![2], DType::I32, distinct(2));
        r.drop_handle(3);
        r.drop_handle(4);
        r.drop_handle(5);
        r.returned(6);
        assert!(
            r.finish(&[StoreId(7), StoreId(8)]).is_none(),
            "past the bound"
        );
    }

    #[test]
    fn a_call_that_returns_what_it_made_is_recorded_with_its_slots() {
        let mut r = recorder();
        r.made(4, Event::View(0, ViewOp::Permute(vec![0])));
        r.drop_handle(4);
        r.returned(3);
        let rec = r.finish(&[StoreId(7), StoreId(8)]).expect("replayable");
        assert_eq!(rec.args, 2);
        assert_eq!(rec.result, Some(2), "the first store made is slot 2");
        assert!(matches!(rec.events.last(), Some(Event::Drop(3))));
    }

    #[test]
    fn a_call_that_keeps_a_handle_is_not_recorded() {
        let mut r = recorder();
        r.made(4, Event::Create(vec![2], DType::F32));
        r.returned(3);
        assert!(r.finish(&[StoreId(7), StoreId(8)]).is_none());
    }

    #[test]
    fn a_call_lent_other_stores_or_using_a_foreign_handle_is_not_recorded() {
        let mut r = recorder();
        r.returned(3);
        assert!(r.finish(&[StoreId(8), StoreId(7)]).is_none(), "lent order");
        let mut r = recorder();
        assert_eq!(r.slot(99), None);
        r.returned(3);
        assert!(
            r.finish(&[StoreId(7), StoreId(8)]).is_none(),
            "unknown handle"
        );
    }

    #[test]
    fn a_call_of_too_many_import_calls_is_not_recorded() {
        let mut r = recorder();
        for _ in 0..MAX_EVENTS {
            r.push(Event::Shape(0, vec![4]));
        }
        r.returned(3);
        assert!(r.finish(&[StoreId(7), StoreId(8)]).is_none());
        let mut r = recorder();
        for _ in 1..MAX_EVENTS {
            r.push(Event::Shape(0, vec![4]));
        }
        r.returned(3);
        assert!(
            r.finish(&[StoreId(7), StoreId(8)]).is_some(),
            "exactly the limit"
        );
    }

    #[test]
    fn a_call_that_reads_data_or_drops_a_lent_handle_is_not_recorded() {
        let mut r = recorder();
        r.spoil();
        r.returned(3);
        assert!(r.finish(&[StoreId(7), StoreId(8)]).is_none(), "read");
        let mut r = recorder();
        r.drop_handle(1);
        r.returned(3);
        assert!(
            r.finish(&[StoreId(7), StoreId(8)]).is_none(),
            "lent dropped"
        );
    }
}
