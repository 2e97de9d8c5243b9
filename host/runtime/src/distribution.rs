//! The seam for running one program on several ranks (SPMD with control replication; see
//! `docs/design.md`, *Distribution*): every rank runs the same tasks and executes the points
//! it owns ([`crate::mapping`]). A [`Distribution`] adds what crosses ranks: before a task,
//! the elements its points read that other ranks wrote; after it, the record of who wrote
//! what; the partial results of reductions, merged across ranks in the canonical order; and
//! the whole of a store when the application reads or writes it. `weft-dist` implements it; one
//! process needs none.

use weft_ir::reduction::LoopPartial;

use crate::Result;
use crate::backend::Backend;
use crate::stores::{StorageId, Stores};
use crate::task::IndexTask;

/// What one rank sent to others, and how its message plans were found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes sent.
    pub bytes: u64,
    /// Messages sent (point-to-point, and one per collective operation).
    pub messages: u64,
    /// Message plans derived.
    pub plans_derived: u64,
    /// Message plans reused from an earlier task with the same partitions and holdings.
    pub plans_reused: u64,
}

/// What a distribution may touch while the runtime waits for it.
pub struct DistContext<'a> {
    /// The store table (buffers are allocated through it).
    pub stores: &'a mut Stores,
    /// The back end that holds this rank's memory.
    pub backend: &'a mut dyn Backend,
}

/// What crosses ranks (see the module documentation). Every method runs on every rank at the
/// same point of the same program, so implementations may communicate in them.
pub trait Distribution {
    /// This process's rank.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn ranks(&self) -> usize;

    /// What this rank has sent so far.
    fn traffic(&self) -> Traffic;

    /// Before `task` runs: every element that this rank's points of `task` read must hold its
    /// latest value in this rank's memory.
    fn before_task(&mut self, cx: &mut DistContext<'_>, task: &IndexTask) -> Result<()>;

    /// After `task` ran on every rank: records what its points wrote.
    fn after_task(&mut self, cx: &mut DistContext<'_>, task: &IndexTask) -> Result<()>;

    /// Every rank's held partial results of a task (its `held`), merged in one order that is
    /// the same on every rank; the canonical tree makes the merged result independent of it.
    fn gather_partials(&mut self, held: Vec<LoopPartial>) -> Result<Vec<LoopPartial>>;

    /// The task's reductions were folded into their stores on every rank alike: they now hold
    /// the same values everywhere.
    fn replicated(&mut self, storage: StorageId);

    /// Before the application writes `storage` (every rank the same bytes): every element
    /// must hold its latest value here, in a buffer that holds the whole storage; it is then
    /// the same on every rank.
    fn before_write(&mut self, cx: &mut DistContext<'_>, storage: StorageId) -> Result<()>;

    /// For the application's read of `storage`: all of its bytes (row-major), with the latest
    /// value of every element, on every rank. This rank's buffer keeps holding only its span.
    fn gather(&mut self, cx: &mut DistContext<'_>, storage: StorageId) -> Result<Vec<u8>>;

    /// A task failed on this rank (a kernel fault may happen on one rank only): the other
    /// ranks would wait for it forever. Where they can be told (a job's own communicator),
    /// they are, and their exchanges then fail too; otherwise the whole process group ends
    /// here, after saying which rank failed and why.
    fn fail(&self, error: &crate::Error);
}
