//! The window: pending tasks in program order, and the policy that decides when they run.
//!
//! - **Submitting** checks a task's partitions against its stores, folds them into root
//!   coordinates, numbers the task and appends it.
//! - **Growing**: the window starts at [`INITIAL_WINDOW`] tasks. When it is full and the
//!   planner would run all of it together, it doubles (up to the bound) instead of running, so
//!   that fusion is not cut at an arbitrary place; otherwise its front runs.
//! - **Running the front**: the planner says how many tasks at the front run together and
//!   gives the task that runs them; the executor runs it, and the tasks are retired.
//! - **Reads**: a read of a storage runs only the tasks it needs (its writers, what they read,
//!   and the earlier tasks that touch what they write); the others stay pending. A write by the
//!   host also runs the pending readers of the storage first.
//! - **Summaries** (`WEFT_EXPLAIN=1`): the plans of one run of the window (a full window's
//!   front, or what a flush or a read runs) are summarized together, in the planner's words
//!   ([`crate::planner::PlanSummary`]); a run summarized alike before is counted rather than
//!   shown again ([`Core::take_summaries`]).
//! - **Faults**: a task that fails leaves what it writes without a value, and the tasks that
//!   use that skip; the others run (see [`crate::faults`]). [`Core::flush`] reports the
//!   failure, and so does a read of a store it left without a value.
//!
//! The policy knows nothing of how the planner decides or how the back end runs: its tests
//! use fake planners and the interpreting [`crate::testing::FakeBackend`].

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use weft_ir::Privilege;
use weft_ir::semantics::MAX_LAUNCH_RANK;

use crate::core::{Core, EXPLAIN_TARGET, SUMMARIES_REMEMBERED, SUMMARY_TARGET};
use crate::partition::{Partition, RootPartition};
use crate::planner::{PlanContext, PlanSummary};
use crate::stores::{StorageId, StoreId};
use crate::task::IndexTask;
use crate::{Error, Result};

/// The window's size before it has grown.
pub const INITIAL_WINDOW: usize = 16;

/// Pending tasks and what the policy keeps about them.
pub struct Window {
    tasks: Vec<IndexTask>,
    /// Per storage, how many arguments of pending tasks read or reduce it.
    readers: crate::FastMap<StorageId, u32>,
    /// The last sequence number given to a task.
    last_seq: u64,
    /// The current size: it starts small and doubles (up to `bound`) each time a full window
    /// could run together.
    size: usize,
    bound: usize,
}

impl Window {
    /// An empty window that grows up to `bound` tasks.
    pub fn new(bound: usize) -> Window {
        let bound = bound.max(1);
        Window {
            tasks: Vec::new(),
            readers: crate::FastMap::default(),
            last_seq: 0,
            size: INITIAL_WINDOW.min(bound),
            bound,
        }
    }

    /// Pending tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is pending.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The window's current size (it grows while whole windows run together).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The pending tasks, in program order.
    pub fn tasks(&self) -> &[IndexTask] {
        &self.tasks
    }
}

/// Where to cut a full window whose tasks repeat a loop's body, so that the next window
/// starts where this one's iterations start: `None` when they do not repeat, or the window
/// already ends at an iteration's end.
///
/// A loop of `p` tasks an iteration fills a window of `n` tasks with `n / p` iterations and a
/// part of one; run whole, the next window starts elsewhere in the body, and each of up to
/// `p` alignments is a plan and a kernel of its own (NPBench's `mandelbrot1`: 24 kernels
/// compiled for one loop). Cut after the last whole iteration, every window of the loop
/// starts at the same task and is the same plan. The body is found as the least period `p`
/// of the window's kernels (compared by identity) that holds over its last `2 p` tasks at
/// least and over half of it; the iterations are counted from where that run starts, so the
/// tasks before the loop are not part of any. The search gives up after `4 n` comparisons
/// (a window at its bound whose fronts run one task at a time calls it on every submit).
pub(crate) fn loop_cut(tasks: &[IndexTask]) -> Option<usize> {
    let n = tasks.len();
    let same = |i: usize, j: usize| Arc::ptr_eq(&tasks[i].kernel, &tasks[j].kernel);
    let mut budget = 4 * n;
    for p in 1..=n / 2 {
        // The start of the longest run at the window's end that repeats with period p.
        let mut start = n - p;
        while start > 0 && same(start - 1, start - 1 + p) {
            start -= 1;
            budget = budget.checked_sub(1)?;
        }
        budget = budget.checked_sub(1)?;
        if n - start >= (2 * p).max(n / 2) {
            let cut = start + (n - start) / p * p;
            return (cut > 0 && cut < n).then_some(cut);
        }
    }
    None
}

/// The summaries of the window's runs (`WEFT_EXPLAIN=1`): the plans of the run under way, and
/// what was shown so far.
#[derive(Debug, Default)]
pub(crate) struct Summaries {
    /// The summaries of the plans of the run under way.
    batch: Vec<PlanSummary>,
    /// Hashes of the summaries shown (at most [`SUMMARIES_REMEMBERED`]).
    shown: HashSet<u64>,
    /// Runs not shown since the last count because they repeated one shown.
    pub(crate) repeated: u64,
    /// The summaries gathered for [`Core::take_summaries`].
    pub(crate) log: Vec<String>,
}

/// The text of one run of the window whose plans are `plans` (`WEFT_EXPLAIN=1`). A run of
/// one plan is its headline after `weft: `, with its details and its cut indented below; a
/// run of several is a heading (`weft: window of 12 tasks -> 3 tasks`), then each plan's
/// headline, its details indented further, and its cut.
pub fn summary_text(plans: &[PlanSummary]) -> String {
    let mut out = String::new();
    let tasks: usize = plans.iter().map(|p| p.tasks).sum();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if let [plan] = plans {
        out.push_str(&format!("weft: {}\n", plan.headline));
        for line in plan.details.iter().chain(&plan.cut) {
            out.push_str(&format!("  {line}\n"));
        }
        return out;
    }
    out.push_str(&format!(
        "weft: window of {tasks} task{} -> {} task{}\n",
        plural(tasks),
        plans.len(),
        plural(plans.len())
    ));
    for plan in plans {
        out.push_str(&format!("  {}\n", plan.headline));
        for line in &plan.details {
            out.push_str(&format!("    {line}\n"));
        }
        if let Some(cut) = &plan.cut {
            out.push_str(&format!("  {cut}\n"));
        }
    }
    out
}

impl Core {
    /// Checks a task's partitions and adds it to the window; runs the front of the window if
    /// it is full.
    pub fn submit(&mut self, mut task: IndexTask) -> Result<()> {
        // The kernel's entry (shared, not copied: its name is only needed for an error).
        let kernel = Arc::clone(&task.kernel);
        let invalid = |message: String| Error::InvalidTask {
            plugin: kernel
                .name()
                .split('.')
                .next()
                .unwrap_or_default()
                .to_string(),
            kernel: kernel.name().to_string(),
            message,
        };
        if task.launch.len() > MAX_LAUNCH_RANK {
            return Err(invalid(format!(
                "launch domain of rank {} (at most {MAX_LAUNCH_RANK})",
                task.launch.len()
            )));
        }
        let limits = &self.settings.limits;
        match crate::limits::launch_points(&task.launch) {
            Some(n) if n <= limits.launch_points => {}
            n => {
                return Err(invalid(format!(
                    "launch domain {} has {} points, more than the limit of {}",
                    crate::view::shape_text(&task.launch),
                    n.map_or_else(|| "over 2^64".to_string(), |n| n.to_string()),
                    limits.launch_points
                )));
            }
        }
        if task.args.len() > limits.task_args {
            return Err(invalid(format!(
                "{} store arguments, more than the limit of {}",
                task.args.len(),
                limits.task_args
            )));
        }
        let stores = &self.stores;
        crate::task::check_against_kernel(&task, &task.kernel, |id| {
            stores.get(id).ok().map(|i| (i.shape.len(), i.dtype))
        })
        .map_err(&invalid)?;
        // A dense product may go over a grid of ranks (`crate::products`), and so may a
        // product of a matrix by a vector by parts (`crate::matvec_grid`); over a grid of
        // layers, a second task follows it.
        let (scheduled, follow) = if task.kernel.product().is_some() {
            match self.schedule_product(&mut task)? {
                Some((note, follow)) => (Some(note), follow),
                None => (None, None),
            }
        } else if task.kernel.matvec_parts().is_some() {
            match self.schedule_matvec(&mut task)? {
                Some((note, follow)) => (Some(note), Some(follow)),
                None => (None, None),
            }
        } else {
            (None, None)
        };
        for (i, arg) in task.args.iter_mut().enumerate() {
            let info = self.stores.get(arg.store)?;
            arg.partition
                .check(info.shape.len(), task.launch.len())
                .map_err(|m| invalid(format!("argument {i}: {m}")))?;
            if arg.privilege.mutates() && info.map.overlaps_itself() {
                return Err(invalid(format!(
                    "argument {i} is written through a broadcast view of shape {}, whose \
                     elements repeat (strides {:?}); broadcast views are read-only",
                    crate::view::shape_text(&info.shape),
                    info.map.strides
                )));
            }
            if matches!(arg.privilege, Privilege::Write | Privilege::ReadWrite)
                && let Some(d) = overlapping_launch_dim(&arg.partition, &task.launch)
            {
                return Err(invalid(format!(
                    "argument {i} is written through a partition whose tiles overlap: \
                     points that differ in launch dimension {d} see the same elements"
                )));
            }
            arg.storage = info.storage;
            arg.root_partition = RootPartition::fold(&arg.partition, &info.map);
            if arg.privilege.mutates() {
                self.stores.written(info.storage);
            }
            arg.root_partition.normalize_for(&task.launch);
        }
        // Image partitions, now that their sources are folded.
        for i in 0..task.args.len() {
            let Partition::Image(k) = task.args[i].partition else {
                continue;
            };
            let source = self.image_source(&task, i, k as usize).map_err(&invalid)?;
            if task.args[i].privilege.mutates()
                && let Some(d) =
                    overlapping_launch_dim(&task.args[k as usize].partition, &task.launch)
            {
                return Err(invalid(format!(
                    "argument {i} is written through an image of argument {k}, whose partition \
                     gives points that differ in launch dimension {d} the same rows"
                )));
            }
            let view = self.stores.get(task.args[i].store)?.map.clone();
            task.args[i].root_partition = RootPartition::image(&view, source.0, source.1);
        }
        self.window.last_seq += 1;
        task.seq = self.window.last_seq;
        if let Some(note) = scheduled {
            self.product_notes.insert(task.seq, note);
        }
        if let Some(site) = &self.call_site {
            self.sites.insert(task.seq, site.clone());
        }
        for arg in &task.args {
            self.stores.add_pending(arg.store);
            if !matches!(arg.privilege, Privilege::Write) {
                *self.window.readers.entry(arg.storage).or_insert(0) += 1;
            }
        }
        self.stats.tasks_submitted += 1;
        self.window.tasks.push(task);
        while self.window.tasks.len() >= self.window.size {
            self.munch()?;
        }
        if let Some((tasks, partial)) = follow {
            let submitted = tasks.into_iter().try_for_each(|t| self.submit(t));
            self.release(partial);
            submitted?;
        }
        Ok(())
    }

    /// The source storage and partition of argument `i`'s image of argument `k`, checked: `k`
    /// is another argument, read-only, an `(n, 2)` store of `i32` or `i64` whose partition
    /// keeps both columns together.
    fn image_source(
        &self,
        task: &IndexTask,
        i: usize,
        k: usize,
    ) -> std::result::Result<(StorageId, RootPartition), String> {
        let bad = |m: String| format!("argument {i}: image of argument {k}: {m}");
        let src = task
            .args
            .get(k)
            .filter(|_| k != i)
            .ok_or_else(|| bad("no such other argument".into()))?;
        if src.privilege != Privilege::Read {
            return Err(bad("the source must be passed read-only".into()));
        }
        if matches!(src.partition, Partition::Image(_)) {
            return Err(bad("the source is itself an image".into()));
        }
        let info = self.stores.get(src.store).map_err(|e| bad(e.to_string()))?;
        if info.shape.len() != 2 || info.shape[1] != 2 {
            return Err(bad(format!(
                "the source must have shape (n, 2), not {:?}",
                info.shape
            )));
        }
        if !matches!(info.dtype, weft_ir::DType::I32 | weft_ir::DType::I64) {
            return Err(bad(format!(
                "the source must hold i32 or i64, not {}",
                info.dtype
            )));
        }
        if let Some(t) = &src.root_partition.tiling
            && (t.projection[1].is_some() || t.tile[1] < 2 || t.offset[1] != 0)
        {
            return Err(bad("the source's partition splits its two columns".into()));
        }
        Ok((src.storage, src.root_partition.clone()))
    }

    /// The sequence number the next submitted task will get.
    pub fn next_seq(&self) -> u64 {
        self.window.last_seq + 1
    }

    /// Deals with a full window: if all of it would run together, the window grows (up to its
    /// bound) and nothing runs yet; otherwise its front runs.
    fn munch(&mut self) -> Result<()> {
        if self.window.size < self.window.bound
            && self.planner.fusible_prefix(&self.window.tasks) == self.window.tasks.len()
        {
            self.window.size = (self.window.size * 2).min(self.window.bound);
            return Ok(());
        }
        let mut tasks = std::mem::take(&mut self.window.tasks);
        // The planner sees the window up to the loop's cut; the rest stays pending.
        let rest = loop_cut(&tasks).map_or_else(Vec::new, |cut| tasks.split_off(cut));
        let result = self.run_front(&mut tasks);
        tasks.extend(rest);
        self.window.tasks = tasks;
        self.summarize_run();
        result
    }

    /// Ends the summary of a run of the window: shows it, unless a run alike was shown
    /// before (then it is counted, for [`Core::finish_summaries`]).
    fn summarize_run(&mut self) {
        if self.summaries.batch.is_empty() {
            return;
        }
        let text = summary_text(&std::mem::take(&mut self.summaries.batch));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let hash = hasher.finish();
        if self.summaries.shown.contains(&hash) {
            self.summaries.repeated += 1;
            return;
        }
        if self.summaries.shown.len() < SUMMARIES_REMEMBERED {
            self.summaries.shown.insert(hash);
        }
        self.publish_summary(text);
    }

    /// Emits a summary's text as a `tracing` event of target [`SUMMARY_TARGET`], and gathers
    /// it with [`crate::Settings::summarize`] on.
    pub(crate) fn publish_summary(&mut self, text: String) {
        tracing::info!(target: SUMMARY_TARGET, "{text}");
        if self.settings.summarize {
            self.summaries.log.push(text);
        }
    }

    /// Runs the front of `tasks` (what the planner puts together) and removes it from `tasks`.
    fn run_front(&mut self, tasks: &mut Vec<IndexTask>) -> Result<()> {
        if tasks.is_empty() {
            return Ok(());
        }
        let explain = self.settings.explain
            || tracing::enabled!(target: EXPLAIN_TARGET, tracing::Level::INFO);
        let summarize = self.settings.summarize
            || tracing::enabled!(target: SUMMARY_TARGET, tracing::Level::INFO);
        let plan = self.planner.plan(
            tasks,
            &PlanContext {
                stores: &self.stores,
                readers: &self.window.readers,
                explain,
                summarize,
                sites: &self.sites,
            },
        )?;
        if let Some(text) = plan.explanation {
            tracing::info!(target: EXPLAIN_TARGET, "{text}");
            if self.settings.explain {
                self.explain_log.push(text);
            }
        }
        let prefix = plan.prefix.clamp(1, tasks.len());
        // How the products among them were laid over the ranks.
        let notes: Vec<String> = tasks[..prefix]
            .iter()
            .filter_map(|t| self.product_notes.remove(&t.seq))
            .collect();
        for note in &notes {
            tracing::info!(target: EXPLAIN_TARGET, "{note}");
            if self.settings.explain {
                self.explain_log.push(note.clone());
            }
        }
        if summarize {
            let mut summary = plan.summary.unwrap_or_else(|| {
                let first = &tasks[0];
                PlanSummary::alone(first.name(), self.sites.get(&first.seq).map(|s| &**s), None)
            });
            summary.details.extend(notes);
            self.summaries.batch.push(summary);
        }
        let done: Vec<IndexTask> = tasks.drain(..prefix).collect();
        // The references to each store held by the tasks run so far (not yet retired).
        let mut uses: crate::FastMap<StoreId, u32> = crate::FastMap::default();
        let result = self.run_isolated(&done, plan.fused.as_ref(), &mut uses);
        for task in &done {
            self.retire(task);
        }
        result
    }

    /// Runs every pending task, in order, and returns the first task failure not yet
    /// reported (see [`crate::faults`]): the tasks that do not depend on a failed one run
    /// anyway. Any other error drops the rest of the window.
    pub fn flush(&mut self) -> Result<()> {
        self.collect_released();
        let mut tasks = std::mem::take(&mut self.window.tasks);
        self.run_all(&mut tasks)?;
        match self.take_fault() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// [`Core::flush`], then waits until the back end has run everything it was given (a GPU
    /// runs launches after the host has enqueued them): the point where a clock may stop.
    /// Reports a launch's fault found on the way.
    pub fn synchronize(&mut self) -> Result<()> {
        self.flush()?;
        self.backend.synchronize()
    }

    /// Runs all of `tasks`; on an error that is not a task's failure, drops the rest.
    fn run_all(&mut self, tasks: &mut Vec<IndexTask>) -> Result<()> {
        while !tasks.is_empty() {
            if let Err(e) = self.run_front(tasks) {
                for task in std::mem::take(tasks) {
                    self.retire(&task);
                }
                self.summarize_run();
                return Err(e);
            }
        }
        self.summarize_run();
        Ok(())
    }

    /// Runs the pending tasks that a read of `storage` needs: the window up to the last task
    /// that writes `storage` (with `for_write`, the last that reads or writes it: the caller
    /// overwrites it), in program order. The tasks after it stay in the window.
    ///
    /// The earlier tasks run too even where the read does not need them: left behind, they
    /// would wait for a later flush, keep their inputs alive, and miss fusing with the
    /// needed tasks they sit among (CG's `x += alpha p` beside `r -= alpha q`).
    pub fn flush_for(&mut self, storage: StorageId, for_write: bool) -> Result<()> {
        let last = self.window.tasks.iter().rposition(|task| {
            task.args
                .iter()
                .any(|a| a.storage == storage && (for_write || a.privilege.mutates()))
        });
        let Some(last) = last else {
            return Ok(());
        };
        let mut tasks = std::mem::take(&mut self.window.tasks);
        self.window.tasks = tasks.split_off(last + 1);
        self.run_all(&mut tasks)
    }

    /// Drops the pending tasks numbered `first_seq` or later (a failed plugin call's tasks).
    pub fn truncate_window(&mut self, first_seq: u64) {
        let Some(mark) = self.window.tasks.iter().position(|t| t.seq >= first_seq) else {
            return;
        };
        for task in self.window.tasks.split_off(mark) {
            self.retire(&task);
            self.stats.tasks_submitted = self.stats.tasks_submitted.saturating_sub(1);
        }
    }

    /// Forgets a task that ran (or was dropped): its stores' pending counts and its reads.
    fn retire(&mut self, task: &IndexTask) {
        self.sites.remove(&task.seq);
        self.product_notes.remove(&task.seq);
        for arg in &task.args {
            let freed = self.stores.remove_pending(arg.store);
            self.free(freed);
            if !matches!(arg.privilege, Privilege::Write)
                && let Some(n) = self.window.readers.get_mut(&arg.storage)
            {
                *n -= 1;
                if *n == 0 {
                    self.window.readers.remove(&arg.storage);
                }
            }
        }
    }

    /// The pending tasks.
    pub fn window(&self) -> &Window {
        &self.window
    }
}

/// A launch dimension along which the tiles of `partition` overlap (two points that differ
/// only in it see the same elements), if the launch has more than one point.
fn overlapping_launch_dim(partition: &Partition, launch: &[u64]) -> Option<usize> {
    // Checked: a launch past the limit is refused before this, but nothing here may wrap.
    let points = crate::limits::launch_points(launch).unwrap_or(u64::MAX);
    if points <= 1 {
        return None;
    }
    match partition {
        Partition::None => launch.iter().position(|&e| e > 1),
        // The ranges of an image's source are disjoint (its contract): so are the images.
        Partition::Image(_) => None,
        Partition::Tiling(t) => {
            (0..launch.len()).find(|&d| launch[d] > 1 && !t.projection.contains(&Some(d as u32)))
        }
    }
}
