//! The planner seam: what the window asks of task fusion.
//!
//! A [`Planner`] looks at the pending tasks of a window and decides what runs next: how many
//! tasks at the front run together, which of their stores become task-local, and the fused
//! task that runs them. `weft-fusion` implements it with Diffuse's constraints;
//! [`NoFusion`] runs every task on its own. The window's policy (when to grow, when to run,
//! what a read needs) lives in [`crate::window`] and knows nothing of how a planner decides.

use std::collections::HashMap;

use crate::Result;
use crate::stores::{StorageId, Stores};
use crate::task::IndexTask;

/// What a planner may look at besides the tasks.
pub struct PlanContext<'a> {
    /// The store table (shapes, liveness).
    pub stores: &'a Stores,
    /// Per storage, how many arguments of pending tasks (anywhere in the window, the tasks
    /// being planned included) read or reduce it.
    pub readers: &'a HashMap<StorageId, u32>,
    /// Whether the caller wants an explanation of the decision.
    pub explain: bool,
}

/// What to run next.
#[derive(Debug)]
pub struct Plan {
    /// How many tasks at the front of the window it covers (at least one).
    pub prefix: usize,
    /// The one task that runs them, when it is not simply the first task (`prefix` is 1 and
    /// the first task runs as it is when this is `None`).
    pub fused: Option<IndexTask>,
    /// Why, in words, when [`PlanContext::explain`] asked for it.
    pub explanation: Option<String>,
}

/// Counters of a planner.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlannerStats {
    /// Windows analysed (memo misses).
    pub analyses: u64,
    /// Windows whose plan came from the memo.
    pub memo_hits: u64,
    /// Fused kernels built.
    pub kernels_fused: u64,
    /// Seconds spent analysing and building fused kernels (misses only).
    pub analysis_seconds: f64,
    /// Plans held in the memo now.
    pub memo_entries: u64,
    /// Plans evicted from the memo so far (it is bounded).
    pub memo_evictions: u64,
}

/// Turns the front of a window into a plan (see the module documentation).
pub trait Planner {
    /// How many tasks at the front of `window` would run together. The window grows while
    /// all of it would (so that fusion is not cut at an arbitrary place).
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize;

    /// The plan for the front of `window`, which is not empty.
    fn plan(&mut self, window: &[IndexTask], context: &PlanContext<'_>) -> Result<Plan>;

    /// The planner's counters.
    fn stats(&self) -> PlannerStats;
}

/// The planner that fuses nothing: every task runs on its own.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFusion;

impl Planner for NoFusion {
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize {
        window.len().min(1)
    }

    fn plan(&mut self, _window: &[IndexTask], _context: &PlanContext<'_>) -> Result<Plan> {
        Ok(Plan {
            prefix: 1,
            fused: None,
            explanation: None,
        })
    }

    fn stats(&self) -> PlannerStats {
        PlannerStats::default()
    }
}
