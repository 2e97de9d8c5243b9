//! The four fusion constraints of the Diffuse paper (Figure 5), applied greedily to find the
//! longest fusible prefix of a window.
//!
//! A *store* here is a root storage: views of one root are the same store seen through
//! different partitions (partitions are folded into root coordinates, so two views with the
//! same tiles are different partitions). The constraints, for tasks `T_i` before `T_j`:
//! - **launch-domain equivalence**: every task has the first task's launch domain;
//! - **true dependence**: if `T_i` writes `S` through `P`, `T_j` neither reads nor writes `S`
//!   through another partition;
//! - **anti-dependence**: if `T_i` reads `S` through `P`, `T_j` does not write `S` through
//!   another partition;
//! - **reduction**: if either task reduces to `S`, the other neither reads nor writes `S`.
//!
//! An image partition (see `runtime::partition`) also counts as a read of its source, which
//! no earlier task of the prefix may write, through any partition: the ranges are read when
//! the fused task starts.
//!
//! **Bounded anti-dependence (beyond Diffuse).** A task that writes `S` through `W` where
//! earlier tasks read `S` through other partitions still joins the prefix when `W`'s tiles
//! split only its dimension 0, every earlier access to `S` is a read, touched only at the reading loop's own
//! index ([`weft_runtime::KernelEntry::pointwise`]), through a view that is `W`'s shifted by
//! at most [`MAX_HALO`] along each dimension (a stencil's neighbours), and the task's kernel
//! writes all of `W` before reading it ([`weft_runtime::KernelEntry::overwritten_by`]). Its
//! writes to `S` are then *deferred* ([`Deferral`]): they land when the fused loop ends, and the
//! back end holds back the rows that other chunks still read. Nothing after it in the prefix
//! may touch `S`, and no task of such a prefix reduces (a deferred loop keeps no reduction
//! buffers). The other constraints stay as they are.
//!
//! The analysis compares partitions for equality only (a few rank-sized vectors), and never
//! looks at points: its cost per task does not depend on the launch domain's size.
//!
//! **Scalar tasks.** A task over 0-d stores only, launched on one point (`numeric`'s arithmetic
//! on 0-d arrays, such as `alpha = rr / pq` in CG), joins any launch domain, as Legate's and
//! Diffuse's promotion of future-only tasks does: every point of the fused task computes it
//! again, which gives every point the same values as long as no multi-point task of the prefix
//! writes or reduces a store the scalar task reads or writes, and as long as running the scalar
//! tasks again changes nothing (none updates a store in place, reduces into one, or overwrites
//! what an earlier scalar task read) when the launch has more than one point. That is checked
//! here (the cut is reported as a launch-domain cut).
//!
//! **One point (beyond Diffuse).** A prefix of tasks that all launch on one point (an empty
//! launch domain: scalar tasks, and one-point tasks such as `numeric`'s short dot products)
//! runs each task's loops once, in order. Its tasks may then touch one store through
//! different views (`a[i, j] -= a[i, :j] @ a[j, :j]; a[i, j] /= a[j, j]` in an LU or Cholesky
//! step) with no true or anti-dependence cut: the fused kernel is told it runs on one point
//! (`weft_ir::passes::FusionFacts::one_point`), keeps the views' accesses in order, and
//! forwards nothing between views that may overlap. Reductions still cut.

use weft_ir::Privilege;

use weft_runtime::partition::RootPartition;
use weft_runtime::stores::StorageId;
use weft_runtime::task::IndexTask;

/// The most elements by which a read through a shifted view may reach away from the deferred
/// write it is fused with, along each dimension.
pub const MAX_HALO: u32 = 4;

/// A write that fuses through a bounded anti-dependence: argument `arg` of task `task` of the
/// prefix, whose stores are deferred, with reads of its storage reaching at most `halo` rows
/// (dimension 0 of its view) away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral {
    /// The task, by its index in the prefix.
    pub task: usize,
    /// The argument, by its index in the task.
    pub arg: usize,
    /// Rows of dimension 0 that the reads reach away from each written row.
    pub halo: u32,
}

/// Which constraint cut a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Constraint {
    /// The next task has another launch domain.
    LaunchDomain,
    /// The next task reads or writes, through another partition, a store written earlier.
    TrueDependence,
    /// The next task writes, through another partition, a store read earlier.
    AntiDependence,
    /// The next task touches a store reduced earlier, or reduces a store touched earlier.
    Reduction,
    /// The prefix or the next task is a dense product ([`weft_runtime::KernelEntry::runs_alone`])
    /// of more than tiny arrays ([`runs_alone`]), which runs alone so that the back end may run
    /// its tuned routine (not one of the paper's constraints: Weft's own).
    Product,
    /// The next task and those after it up to the true cut only make what the task that cut
    /// the prefix reads at the same positions: they wait for it in the next window, where
    /// what they make can be a temporary (see [`leave_for_consumer`]; Weft's own).
    Consumer,
}

impl Constraint {
    /// The constraint's name, as the paper gives it.
    pub fn name(self) -> &'static str {
        match self {
            Constraint::LaunchDomain => "launch-domain equivalence",
            Constraint::TrueDependence => "true dependence",
            Constraint::AntiDependence => "anti-dependence",
            Constraint::Reduction => "reduction",
            Constraint::Product => "dense product alone",
            Constraint::Consumer => "left for its consumer",
        }
    }
}

/// Why a prefix stops where it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The constraint that failed.
    pub constraint: Constraint,
    /// The store it failed on (none for launch domains).
    pub storage: Option<StorageId>,
}

/// The accesses to one store seen so far in the prefix.
#[derive(Default)]
struct Seen<'a> {
    reads: Accesses<'a>,
    writes: Accesses<'a>,
    reduced: Option<weft_ir::ReduceOp>,
    /// Written or reduced by a task that is not a scalar task.
    changed_by_launch: bool,
    /// Written by a scalar task.
    written_by_scalar: bool,
    /// Read by a task that is not a scalar task.
    read_by_launch: bool,
    /// Read by a scalar task.
    read_by_scalar: bool,
    /// Read somewhere other than at a reading loop's own index.
    read_elsewhere: bool,
    /// Written by a deferred write: nothing later in the prefix may touch it.
    deferred: bool,
}

/// The partitions through which the prefix reads (or writes) one store. What a later access
/// asks of them is whether some of them differ from its own partition, which only needs to
/// know whether they are all one partition: answered in constant time, so that a loop body
/// of hundreds of statements updating one array (`C[i, :i+1] += ...`) is checked in time
/// linear in its length. The partitions themselves (for the halos of a deferred write) are
/// kept in order, consecutive repeats dropped.
#[derive(Default)]
struct Accesses<'a> {
    /// Inline up to two: most stores are read or written through one or two partitions.
    list: weft_runtime::smallvec::SmallVec<[&'a RootPartition; 2]>,
    /// Whether they are not all one partition.
    many: bool,
}

impl<'a> Accesses<'a> {
    /// Notes an access through `p`.
    fn push(&mut self, p: &'a RootPartition) {
        match (self.list.first(), self.list.last()) {
            (Some(&first), Some(&last)) => {
                self.many |= first != p;
                if last != p {
                    self.list.push(p);
                }
            }
            _ => self.list.push(p),
        }
    }

    /// Whether there was no access.
    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether some access was through another partition than `p`.
    fn other_than(&self, p: &RootPartition) -> bool {
        self.many || self.list.first().is_some_and(|&first| first != p)
    }

    /// The partitions, in order (consecutive repeats dropped).
    fn iter(&self) -> std::slice::Iter<'_, &'a RootPartition> {
        self.list.iter()
    }
}

/// The accesses of the prefix so far, by store (a map: a long loop body names hundreds of
/// temporaries, and a scan of them per argument made the check quadratic in the window).
#[derive(Default)]
struct SeenStores<'a> {
    by_storage: weft_runtime::FastMap<StorageId, Seen<'a>>,
    /// Whether some store was reduced into.
    reduced: bool,
}

impl<'a> SeenStores<'a> {
    /// The accesses to `s`, if any.
    fn get(&self, s: StorageId) -> Option<&Seen<'a>> {
        self.by_storage.get(&s)
    }
}

/// Whether a scalar task, run once per point of a multi-point fused task (as its promotion
/// does), could leave other values than running once: it updates a store in place or reduces
/// into it, or it overwrites a store that it reads itself (through another argument) or that
/// an earlier scalar task of the prefix read.
fn repeats_unsafely(task: &IndexTask, seen: &SeenStores<'_>) -> bool {
    let reads_itself = |storage| {
        task.args
            .iter()
            .any(|a| a.storage == storage && !matches!(a.privilege, Privilege::Write))
    };
    task.args.iter().any(|arg| match arg.privilege {
        Privilege::ReadWrite | Privilege::Reduce(_) => true,
        Privilege::Read => false,
        Privilege::Write => {
            reads_itself(arg.storage) || seen.get(arg.storage).is_some_and(|s| s.read_by_scalar)
        }
    })
}

/// Whether a task is a scalar task: one point, 0-d stores only.
pub fn is_scalar_task(task: &IndexTask) -> bool {
    task.launch.is_empty() && task.args.iter().all(|a| a.root_partition.rank() == 0)
}

/// The launch domain of a fused prefix: that of its first task that is not a scalar task (or
/// of its first task, if all are).
pub fn fused_launch(tasks: &[IndexTask]) -> &[u64] {
    tasks
        .iter()
        .find(|t| !is_scalar_task(t))
        .or(tasks.first())
        .map_or(&[], |t| t.launch.as_slice())
}

/// The most elements any array of a dense product may have for the product to fuse with its
/// neighbours like any other task. A product of 4 x 4 blocks (NPBench's
/// `scattering_self_energies` makes 16 a step, four real ones per complex product) spent
/// 1.4 us a launch on a few dozen multiply-adds, with the element-wise tasks around it cut
/// off into launches of their own; fused, its loops give the routine's bits anyway (the
/// product's order of sums is the kernel's).
pub const TINY_PRODUCT_ELEMENTS: u64 = 256;

/// Whether `task` runs alone, never fused: a dense product
/// ([`weft_runtime::KernelEntry::runs_alone`]) with an array of more than
/// [`TINY_PRODUCT_ELEMENTS`] elements.
pub fn runs_alone(task: &IndexTask) -> bool {
    task.kernel.runs_alone()
        && task.args.iter().any(|a| {
            a.root_partition
                .view
                .shape
                .iter()
                .try_fold(1u64, |n, &e| n.checked_mul(e))
                .is_none_or(|n| n > TINY_PRODUCT_ELEMENTS)
        })
}

/// How many of the tasks of `prefix` run now, when `next` cut it (beyond Diffuse): the prefix
/// less its longest tail of tasks that each only make a store that `next` reads through the
/// same partition and nothing else in the prefix touches. Such a task gains nothing from the
/// prefix: its result must be written out for `next`, while in the next window it fuses with
/// `next` and its result can vanish as a temporary. A time step of a stencil whose first
/// statement reads only the grid's centre (`twice = 2.0 * B[1:-1, 1:-1, 1:-1]` in NPBench's
/// `heat_3d`) joined the step before (it reads what that step wrote, at the same positions)
/// and wrote a whole array each step for the next kernel to read. At least one task stays;
/// the tasks left are those the tail's checks looked at, which are all among the tasks that
/// decided the cut, so the window memo's keys still cover the decision.
pub fn leave_for_consumer(prefix: &[IndexTask], next: &IndexTask, deferrals: &[Deferral]) -> usize {
    // The store a task makes for `next`, if it qualifies.
    let made_for_next = |t: &IndexTask| -> Option<StorageId> {
        if is_scalar_task(t)
            || runs_alone(t)
            || runs_alone(next)
            || t.launch != next.launch
            || t.args.iter().any(|a| a.root_partition.image.is_some())
        {
            return None;
        }
        let mut written = t
            .args
            .iter()
            .filter(|a| !matches!(a.privilege, Privilege::Read));
        let w = written.next()?;
        if written.next().is_some() || !matches!(w.privilege, Privilege::Write) {
            return None;
        }
        let on_w: Vec<_> = next
            .args
            .iter()
            .filter(|a| a.storage == w.storage)
            .collect();
        let read_alike = !on_w.is_empty()
            && on_w.iter().all(|a| {
                matches!(a.privilege, Privilege::Read) && a.root_partition == w.root_partition
            });
        // `next` must not change what the task reads (it would not fuse after it).
        let overwrites = next
            .args
            .iter()
            .any(|n| n.privilege.mutates() && t.args.iter().any(|a| a.storage == n.storage));
        (read_alike && !overwrites).then_some(w.storage)
    };
    let mut kept = prefix.len();
    while kept > 1 {
        let last = kept - 1;
        if deferrals.iter().any(|d| d.task == last) {
            break;
        }
        let Some(w) = made_for_next(&prefix[last]) else {
            break;
        };
        let elsewhere = prefix
            .iter()
            .enumerate()
            .any(|(i, u)| i != last && u.args.iter().any(|a| a.storage == w));
        if elsewhere {
            break;
        }
        kept = last;
    }
    kept
}

/// The longest fusible prefix of `tasks` (at least one task if any), and the cut that ended it
/// (none if the whole window fuses).
pub fn fusible_prefix(tasks: &[IndexTask]) -> (usize, Option<Cut>) {
    let (n, cut, _) = fusible_prefix_deferring(tasks);
    (n, cut)
}

/// As [`fusible_prefix`], with the writes of the prefix that fuse through a bounded
/// anti-dependence (see the module documentation).
pub fn fusible_prefix_deferring(tasks: &[IndexTask]) -> (usize, Option<Cut>, Vec<Deferral>) {
    let mut deferrals = Vec::new();
    if tasks.is_empty() {
        return (0, None, deferrals);
    }
    // Sized for the stores of a short prefix up front: growing the map was a good part of a
    // short scan's cost (each flush of a loop of small steps scans a few tasks).
    let mut seen = SeenStores {
        by_storage: weft_runtime::FastMap::with_capacity_and_hasher(
            (tasks.len() * 3).min(64),
            Default::default(),
        ),
        reduced: false,
    };
    let mut launch: Option<&[u64]> = None;
    // Whether running the scalar tasks so far once per point could give other values than
    // running them once (see `repeats_unsafely`).
    let mut scalar_unsafe = false;
    // Whether the prefix so far has a scalar task, and whether all its tasks run on one point.
    let mut any_scalar = false;
    let mut all_one_point = true;
    for (j, task) in tasks.iter().enumerate() {
        let scalar = is_scalar_task(task);
        let task_unsafe = scalar && repeats_unsafely(task, &seen);
        if j > 0 {
            if runs_alone(task) || runs_alone(&tasks[0]) {
                let cut = Cut {
                    constraint: Constraint::Product,
                    storage: None,
                };
                return (j, Some(cut), deferrals);
            }
            let cut = |storage| {
                Some(Cut {
                    constraint: Constraint::LaunchDomain,
                    storage,
                })
            };
            if !scalar && launch.is_some_and(|l| l != task.launch.as_slice()) {
                return (j, cut(None), deferrals);
            }
            let many = |l: &[u64]| l.iter().product::<u64>() > 1;
            if (task_unsafe && launch.is_some_and(many))
                || (!scalar && many(&task.launch) && scalar_unsafe)
            {
                return (j, cut(None), deferrals);
            }
            // A launch of no points (over an empty array) runs nothing: the scalar steps
            // fused with it would never run.
            let empty = |l: &[u64]| l.iter().product::<u64>() == 0;
            if (scalar && launch.is_some_and(empty))
                || (!scalar && empty(&task.launch) && any_scalar)
            {
                return (j, cut(None), deferrals);
            }
            let one_point = all_one_point && task.launch.is_empty();
            // On one point every task runs in program order: no scalar task is promoted.
            if !one_point && let Some(s) = scalar_conflict(task, scalar, &seen) {
                return (j, cut(Some(s)), deferrals);
            }
            let deferral = bounded_anti_dependence(task, &seen, !deferrals.is_empty());
            if let Some(cut) = conflict(task, &seen, deferral.map(|(arg, _)| arg), one_point) {
                return (j, Some(cut), deferrals);
            }
            if let Some((arg, halo)) = deferral {
                deferrals.push(Deferral { task: j, arg, halo });
            }
            if !deferrals.is_empty()
                && let Some(a) = task
                    .args
                    .iter()
                    .find(|a| matches!(a.privilege, Privilege::Reduce(_)))
            {
                return (
                    j,
                    Some(Cut {
                        constraint: Constraint::Reduction,
                        storage: Some(a.storage),
                    }),
                    deferrals,
                );
            }
        }
        scalar_unsafe |= task_unsafe;
        any_scalar |= scalar;
        all_one_point &= task.launch.is_empty();
        if !scalar && launch.is_none() {
            launch = Some(&task.launch);
        }
        for (a, arg) in task.args.iter().enumerate() {
            seen.reduced |= matches!(arg.privilege, Privilege::Reduce(_));
            let entry = seen.by_storage.entry(arg.storage).or_default();
            if arg.privilege.mutates() {
                if scalar {
                    entry.written_by_scalar = true;
                } else {
                    entry.changed_by_launch = true;
                }
            }
            if !scalar && !matches!(arg.privilege, Privilege::Write) {
                entry.read_by_launch = true;
            }
            if scalar && !matches!(arg.privilege, Privilege::Write) {
                entry.read_by_scalar = true;
            }
            if !matches!(arg.privilege, Privilege::Write)
                && !task
                    .kernel
                    .store_param(a)
                    .is_some_and(|p| task.kernel.pointwise(p))
            {
                entry.read_elsewhere = true;
            }
            if deferrals.last().is_some_and(|d| d.task == j && d.arg == a) {
                entry.deferred = true;
            }
            match arg.privilege {
                Privilege::Read => entry.reads.push(&arg.root_partition),
                Privilege::Write => entry.writes.push(&arg.root_partition),
                Privilege::ReadWrite => {
                    entry.reads.push(&arg.root_partition);
                    entry.writes.push(&arg.root_partition);
                }
                Privilege::Reduce(op) => entry.reduced = Some(op),
            }
        }
    }
    (tasks.len(), None, deferrals)
}

/// A store on which a scalar task and the multi-point tasks of the prefix would disagree: a
/// scalar task touching a store that a multi-point task changed (or overwriting one it read),
/// or a multi-point task changing a store that a scalar task wrote (every point writes it
/// again). With these excluded, the scalar tasks of a prefix can run before all the others.
fn scalar_conflict(task: &IndexTask, scalar: bool, seen: &SeenStores<'_>) -> Option<StorageId> {
    task.args.iter().find_map(|arg| {
        let s = seen.get(arg.storage)?;
        let bad = if scalar {
            // Also: a scalar task may not overwrite what a multi-point task read, so that the
            // fused kernel can run every scalar task first.
            s.changed_by_launch || (arg.privilege.mutates() && s.read_by_launch)
        } else {
            arg.privilege.mutates() && s.written_by_scalar
        };
        bad.then_some(arg.storage)
    })
}

/// Whether `task` may join the prefix through a bounded anti-dependence (see the module
/// documentation): the argument whose writes are deferred and the halo in rows. `deferring`
/// says whether the prefix already defers a write.
fn bounded_anti_dependence(
    task: &IndexTask,
    seen: &SeenStores<'_>,
    deferring: bool,
) -> Option<(usize, u32)> {
    let reduces = |t: &IndexTask| {
        t.args
            .iter()
            .any(|a| matches!(a.privilege, Privilege::Reduce(_)))
    };
    if deferring || reduces(task) || seen.reduced {
        return None;
    }
    task.args.iter().enumerate().find_map(|(a, arg)| {
        let s = seen.get(arg.storage)?;
        let p = &arg.root_partition;
        let anti = s.reads.other_than(p);
        let alone = task
            .args
            .iter()
            .filter(|b| b.storage == arg.storage)
            .count()
            == 1;
        let overwrites = task
            .kernel
            .store_param(a)
            .and_then(|param| task.kernel.overwritten_by(param))
            .is_some();
        if !matches!(arg.privilege, Privilege::Write)
            || !anti
            || !alone
            || !overwrites
            || !s.writes.is_empty()
            || s.read_elsewhere
            || s.deferred
        {
            return None;
        }
        let halos: Option<Vec<u32>> = s.reads.iter().map(|r| bounded_shift(r, p)).collect();
        Some((a, halos?.into_iter().max().unwrap_or(0)))
    })
}

/// If the view of `read` is that of `write` shifted by at most [`MAX_HALO`] along each
/// dimension, the number of rows (dimension 0 of `write`) by which an element read at some
/// index may lie away from the element written at that index; else `None`. Both must be
/// tiled alike, without images, and `write`'s view must nest row-major (positive strides,
/// each dimension's step spanning the whole of the next), so that a shift along the inner
/// dimensions smaller than one row moves at most one row further.
pub fn bounded_shift(read: &RootPartition, write: &RootPartition) -> Option<u32> {
    let (r, w) = (&read.view, &write.view);
    let rank = w.shape.len();
    if rank == 0
        || read.image.is_some()
        || write.image.is_some()
        || read.tiling != write.tiling
        || r.shape != w.shape
        || r.strides != w.strides
    {
        return None;
    }
    let nested = (0..rank).all(|d| {
        w.strides[d] > 0
            && (d + 1 == rank
                || w.strides[d] as u128
                    >= u128::from(w.shape[d + 1]).saturating_mul(w.strides[d + 1] as u128))
    });
    if !nested {
        return None;
    }
    // The shift along each dimension, outermost first.
    let mut rest = i128::from(r.offset) - i128::from(w.offset);
    let shift: Vec<i128> = w
        .strides
        .iter()
        .map(|&stride| {
            let s = i128::from(stride);
            let q = (2 * rest + s).div_euclid(2 * s);
            rest -= q * s;
            q
        })
        .collect();
    let halo = i128::from(MAX_HALO);
    if rest != 0 || shift.iter().any(|q| q.abs() > halo) {
        return None;
    }
    let inner: i128 = (1..rank)
        .map(|d| shift[d].abs() * i128::from(w.strides[d]))
        .sum();
    if inner >= i128::from(w.strides[0]) {
        return None;
    }
    let rows = shift[0].abs() + i128::from(inner > 0);
    u32::try_from(rows).ok()
}

/// The first constraint that `task` breaks against the accesses in `seen`; the anti-dependence
/// of argument `deferred` (a deferred write) is allowed. `one_point` says that the prefix and
/// `task` all launch on one point (an empty launch domain): the fused task then runs each
/// task's loops once and in order, so accesses through other partitions (other elements or
/// rows of one array, or the same ones at a later step of a replayed loop) are no true or
/// anti-dependence.
fn conflict(
    task: &IndexTask,
    seen: &SeenStores<'_>,
    deferred: Option<usize>,
    one_point: bool,
) -> Option<Cut> {
    // An image partition's ranges are read from its source when the fused task starts, so the
    // source must not be written or reduced earlier in the prefix, through any partition
    // (a true dependence that the partitions alone do not show).
    for arg in &task.args {
        let Some(image) = &arg.root_partition.image else {
            continue;
        };
        let changed = seen
            .get(image.source)
            .is_some_and(|s| !s.writes.is_empty() || s.reduced.is_some());
        if changed {
            return Some(Cut {
                constraint: Constraint::TrueDependence,
                storage: Some(image.source),
            });
        }
    }
    for (a, arg) in task.args.iter().enumerate() {
        let Some(s) = seen.get(arg.storage) else {
            continue;
        };
        let cut = |constraint| {
            Some(Cut {
                constraint,
                storage: Some(arg.storage),
            })
        };
        let p = &arg.root_partition;
        let (reads, writes, reduces) = match arg.privilege {
            Privilege::Read => (true, false, None),
            Privilege::Write => (false, true, None),
            Privilege::ReadWrite => (true, true, None),
            Privilege::Reduce(op) => (false, false, Some(op)),
        };
        if s.reduced.is_some() && (reads || writes) {
            return cut(Constraint::Reduction);
        }
        if let Some(op) = reduces {
            // Reductions fold in any order only with one operator.
            let other_op = s.reduced.is_some_and(|earlier| earlier != op);
            if other_op || !s.reads.is_empty() || !s.writes.is_empty() {
                return cut(Constraint::Reduction);
            }
        }
        if (reads || writes) && !one_point && s.writes.other_than(p) {
            return cut(Constraint::TrueDependence);
        }
        if writes && !one_point && deferred != Some(a) && s.reads.other_than(p) {
            return cut(Constraint::AntiDependence);
        }
        if s.deferred {
            // A deferred write's stores land when the fused loop ends.
            return cut(Constraint::TrueDependence);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_runtime::partition::Tiling;
    use weft_runtime::stores::StoreId;
    use weft_runtime::task::{PluginId, TaskArg};
    use weft_runtime::view::ViewMap;

    /// A partition of a 1-d root of 100 elements: the view `lo..lo+len`, in 4 tiles.
    fn part(lo: u64, len: u64) -> RootPartition {
        RootPartition {
            view: ViewMap::whole(&[100]).slice(&[lo], &[lo + len]).unwrap(),
            tiling: Some(Tiling {
                tile: weft_runtime::smallvec::smallvec![len.div_ceil(4)],
                offset: weft_runtime::smallvec::smallvec![0],
                projection: weft_runtime::smallvec::smallvec![Some(0)],
                skew: None,
            }),
            image: None,
        }
    }

    pub(super) fn arg(storage: u64, p: RootPartition, privilege: Privilege) -> TaskArg {
        TaskArg {
            store: StoreId(storage),
            storage: StorageId(storage),
            partition: weft_runtime::partition::Partition::None,
            root_partition: p,
            privilege,
            local: false,
            deferred: None,
        }
    }

    pub(super) fn task(args: Vec<TaskArg>) -> IndexTask {
        IndexTask {
            seq: 0,
            plugin: PluginId(0),
            kernel: weft_runtime::testing::empty_kernel("t"),
            launch: weft_runtime::smallvec::smallvec![4],
            args,
            scalars: Vec::new(),
        }
    }

    pub(super) const R: Privilege = Privilege::Read;
    pub(super) const W: Privilege = Privilege::Write;
    const RW: Privilege = Privilege::ReadWrite;
    const SUM: Privilege = Privilege::Reduce(weft_ir::ReduceOp::Sum);

    pub(super) fn cut_of(tasks: &[IndexTask]) -> (usize, Option<Constraint>, Option<u64>) {
        let (n, cut) = fusible_prefix(tasks);
        (
            n,
            cut.as_ref().map(|c| c.constraint),
            cut.and_then(|c| c.storage).map(|s| s.0),
        )
    }

    #[test]
    fn element_wise_chains_fuse_whole() {
        let all = part(0, 100);
        let tasks = vec![
            task(vec![arg(1, all.clone(), R), arg(2, all.clone(), W)]),
            task(vec![arg(2, all.clone(), R), arg(3, all.clone(), W)]),
            task(vec![arg(3, all.clone(), RW), arg(1, all.clone(), R)]),
        ];
        assert_eq!(cut_of(&tasks), (3, None, None));
    }

    #[test]
    fn an_image_source_written_earlier_in_the_prefix_cuts() {
        // Store 1 holds row ranges (tiled like the launch); store 2 is read through the image
        // of store 1; store 3 is the output.
        let ranges = RootPartition {
            view: ViewMap::whole(&[100, 2]),
            tiling: Some(Tiling {
                tile: weft_runtime::smallvec::smallvec![25, 2],
                offset: weft_runtime::smallvec::smallvec![0, 0],
                projection: weft_runtime::smallvec::smallvec![Some(0), None],
                skew: None,
            }),
            image: None,
        };
        let image = RootPartition::image(&ViewMap::whole(&[500]), StorageId(1), ranges.clone());
        let spmv = || {
            task(vec![
                arg(1, ranges.clone(), R),
                arg(2, image.clone(), R),
                arg(3, part(0, 100), W),
            ])
        };
        // Writing the ranges through the very partition the image uses is still a cut.
        let tasks = vec![task(vec![arg(1, ranges.clone(), W)]), spmv()];
        assert_eq!(
            cut_of(&tasks),
            (1, Some(Constraint::TrueDependence), Some(1))
        );
        // Reading them, or writing the values through an equal image, fuses.
        let write_values = task(vec![arg(1, ranges.clone(), R), arg(2, image.clone(), W)]);
        assert_eq!(cut_of(&[write_values, spmv(), spmv()]), (3, None, None));
        // Images of other sources are other partitions.
        let other = RootPartition::image(&ViewMap::whole(&[500]), StorageId(9), ranges.clone());
        let tasks = vec![task(vec![arg(2, other, W)]), spmv()];
        assert_eq!(
            cut_of(&tasks),
            (1, Some(Constraint::TrueDependence), Some(2))
        );
    }

    #[test]
    fn launch_domains_must_match() {
        let all = part(0, 100);
        let mut second = task(vec![arg(2, all.clone(), R)]);
        second.launch = weft_runtime::smallvec::smallvec![2];
        let tasks = vec![task(vec![arg(1, all.clone(), W)]), second];
        assert_eq!(cut_of(&tasks), (1, Some(Constraint::LaunchDomain), None));
    }

    #[test]
    fn true_dependence_cuts_a_read_through_another_partition() {
        let tasks = vec![
            task(vec![arg(1, part(0, 100), W)]),
            task(vec![arg(1, part(1, 99), R), arg(2, part(0, 99), W)]),
        ];
        assert_eq!(
            cut_of(&tasks),
            (1, Some(Constraint::TrueDependence), Some(1))
        );
        // The same partition is fine.
        let tasks = vec![
            task(vec![arg(1, part(0, 100), W)]),
            task(vec![arg(1, part(0, 100), R), arg(2, part(0, 100), W)]),
        ];
        assert_eq!(cut_of(&tasks).0, 2);
    }

    /// Hundreds of updates of one store in place through one partition (`C[i, :] += ...` in
    /// a loop), each with an operand of its own, fuse whole; then one access through another
    /// partition still cuts, as it would after one update, whether the store's earlier
    /// accesses were one partition repeated or several.
    #[test]
    fn long_in_place_chains_fuse_and_still_cut_on_another_partition() {
        let n = 500u64;
        let mut tasks: Vec<IndexTask> = (0..n)
            .map(|k| {
                task(vec![
                    arg(100 + k, part(0, 100), R),
                    arg(1, part(0, 100), RW),
                ])
            })
            .collect();
        assert_eq!(cut_of(&tasks), (n as usize, None, None));
        tasks.push(task(vec![arg(1, part(1, 99), R), arg(2, part(0, 99), W)]));
        assert_eq!(
            cut_of(&tasks),
            (n as usize, Some(Constraint::TrueDependence), Some(1))
        );
        // A write through another partition after many reads of one: an anti-dependence.
        let mut reads: Vec<IndexTask> = (0..n)
            .map(|k| task(vec![arg(1, part(0, 100), R), arg(100 + k, part(0, 100), W)]))
            .collect();
        reads.push(task(vec![arg(1, part(0, 50), W)]));
        assert_eq!(
            cut_of(&reads),
            (n as usize, Some(Constraint::AntiDependence), Some(1))
        );
        // Reads through two partitions, then a write through the first: the second differs.
        let mut two = vec![
            task(vec![arg(1, part(0, 100), R), arg(2, part(0, 100), W)]),
            task(vec![arg(1, part(0, 100), R), arg(3, part(0, 100), W)]),
            task(vec![arg(1, part(0, 50), R), arg(4, part(0, 50), W)]),
        ];
        assert_eq!(cut_of(&two).0, 3);
        two.push(task(vec![arg(1, part(0, 100), W)]));
        assert_eq!(cut_of(&two), (3, Some(Constraint::AntiDependence), Some(1)));
    }

    #[test]
    fn accesses_know_whether_they_are_one_partition() {
        let (a, b) = (part(0, 100), part(1, 99));
        let mut acc = Accesses::default();
        assert!(acc.is_empty() && !acc.other_than(&a));
        for _ in 0..3 {
            acc.push(&a);
        }
        assert!(!acc.other_than(&a) && acc.other_than(&b));
        assert_eq!(acc.iter().count(), 1, "repeats are kept once");
        acc.push(&b);
        acc.push(&a);
        assert!(acc.other_than(&a) && acc.other_than(&b));
        assert_eq!(acc.iter().count(), 3, "a, b, a in order");
    }

    /// Figure 1 of the paper: reads of aliasing views of `grid` (center and north), then
    /// `center[:] = work` writes `grid` through the center view: an anti-dependence.
    #[test]
    fn figure_1_the_stencil_write_back_is_not_fused() {
        let center = part(11, 78);
        let north = part(1, 78);
        let tasks = vec![
            task(vec![
                arg(1, center.clone(), R),
                arg(1, north, R),
                arg(2, part(0, 78), W),
            ]),
            task(vec![arg(2, part(0, 78), R), arg(1, center, W)]),
        ];
        assert_eq!(
            cut_of(&tasks),
            (1, Some(Constraint::AntiDependence), Some(1))
        );
    }

    #[test]
    fn reductions_do_not_fuse_with_reads_or_writes_of_their_store() {
        let all = part(0, 100);
        let scalar = RootPartition::scalar();
        let reduce = task(vec![arg(1, all.clone(), R), arg(9, scalar.clone(), SUM)]);
        // Two reductions into one store, with one operator, fuse.
        let tasks = vec![
            reduce.clone(),
            task(vec![arg(2, all.clone(), R), arg(9, scalar.clone(), SUM)]),
        ];
        assert_eq!(cut_of(&tasks).0, 2);
        // Reading the partial result does not.
        let tasks = vec![
            reduce.clone(),
            task(vec![arg(9, scalar.clone(), R), arg(3, all.clone(), W)]),
        ];
        assert_eq!(cut_of(&tasks), (1, Some(Constraint::Reduction), Some(9)));
        // Nor does reducing a store read before.
        let tasks = vec![
            task(vec![arg(9, scalar.clone(), R), arg(3, all.clone(), W)]),
            reduce,
        ];
        assert_eq!(cut_of(&tasks), (1, Some(Constraint::Reduction), Some(9)));
        // Nor another operator.
        let max = Privilege::Reduce(weft_ir::ReduceOp::Max);
        let tasks = vec![
            task(vec![arg(1, all.clone(), R), arg(9, scalar.clone(), SUM)]),
            task(vec![arg(1, all, R), arg(9, scalar, max)]),
        ];
        assert_eq!(cut_of(&tasks).1, Some(Constraint::Reduction));
    }
}

#[cfg(test)]
mod scalar_task_tests {
    use super::tests::{R, W, cut_of};
    use super::*;
    use weft_runtime::partition::{Partition, Tiling};
    use weft_runtime::stores::StoreId;
    use weft_runtime::task::{PluginId, TaskArg};
    use weft_runtime::view::ViewMap;

    fn arg(storage: u64, rank: usize, privilege: Privilege) -> TaskArg {
        let root_partition = if rank == 0 {
            RootPartition::scalar()
        } else {
            RootPartition {
                view: ViewMap::whole(&[100]),
                tiling: Some(Tiling {
                    tile: weft_runtime::smallvec::smallvec![25],
                    offset: weft_runtime::smallvec::smallvec![0],
                    projection: weft_runtime::smallvec::smallvec![Some(0)],
                    skew: None,
                }),
                image: None,
            }
        };
        TaskArg {
            store: StoreId(storage),
            storage: StorageId(storage),
            partition: Partition::None,
            root_partition,
            privilege,
            local: false,
            deferred: None,
        }
    }

    fn task(launch: Vec<u64>, args: Vec<TaskArg>) -> IndexTask {
        IndexTask {
            seq: 0,
            plugin: weft_runtime::task::PluginId(0),
            kernel: weft_runtime::testing::empty_kernel("t"),
            launch: launch.into(),
            args,
            scalars: Vec::new(),
        }
    }

    proptest::proptest! {
        /// A prefix cut at task `p` is decided by the tasks up to `p`: the constraint scan
        /// over them gives the prefix, cut and deferrals it gives over the whole window (the
        /// window memo keys a plan by these tasks alone).
        #[test]
        fn a_cut_prefix_is_decided_by_the_tasks_up_to_its_cut(
            window in proptest::collection::vec(
                (
                    0usize..3,
                    proptest::collection::vec((1u64..5, proptest::bool::ANY, 0u8..4), 1..4),
                ),
                1..9,
            )
        ) {
            let launches = [vec![], vec![4], vec![2]];
            let privileges = [
                Privilege::Read,
                Privilege::Write,
                Privilege::ReadWrite,
                Privilege::Reduce(weft_ir::ReduceOp::Sum),
            ];
            let tasks: Vec<IndexTask> = window
                .iter()
                .map(|(l, args)| {
                    let launch = launches[*l].clone();
                    let args = args
                        .iter()
                        .map(|&(s, vector, p)| {
                            let rank = usize::from(vector && !launch.is_empty());
                            arg(s, rank, privileges[usize::from(p)])
                        })
                        .collect();
                    task(launch, args)
                })
                .collect();
            let whole = fusible_prefix_deferring(&tasks);
            proptest::prop_assert!(whole.0 >= 1 && whole.0 <= tasks.len());
            proptest::prop_assert_eq!(whole.0 < tasks.len(), whole.1.is_some());
            let deciding = (whole.0 + 1).min(tasks.len());
            proptest::prop_assert_eq!(fusible_prefix_deferring(&tasks[..deciding]), whole);
        }
    }

    /// Element `at` of storage `storage`, a 1-d root of 100 elements, as a 0-d view.
    fn element(storage: u64, at: u64, privilege: Privilege) -> TaskArg {
        let view = ViewMap::whole(&[100])
            .slice(&[at], &[at + 1])
            .expect("a slice")
            .reshape(&[])
            .expect("a reshape")
            .expect("a 0-d view");
        let mut a = arg(storage, 0, privilege);
        a.root_partition = RootPartition {
            view,
            tiling: None,
            image: None,
        };
        a
    }

    #[test]
    fn scalar_tasks_on_other_elements_of_one_array_fuse_on_one_point_only() {
        // a[3] = t - s; then q = a[3] / a[5]; then a[5] = q: a write of element 3, reads of
        // elements 3 and 5, and a write of element 5 (after element 5 was read).
        let step = || {
            vec![
                task(vec![], vec![element(1, 3, W), arg(2, 0, R)]),
                task(
                    vec![],
                    vec![element(1, 3, R), element(1, 5, R), arg(3, 0, W)],
                ),
                task(vec![], vec![arg(3, 0, R), element(1, 5, W)]),
            ]
        };
        assert_eq!(fusible_prefix(&step()), (3, None), "one point: no cut");
        // A multi-point task before them: the prefix runs on four points, and the read of
        // element 5 through another view than the write of element 3 cuts.
        let mut tasks = vec![task(vec![4], vec![arg(4, 1, R), arg(5, 1, W)])];
        tasks.extend(step());
        assert_eq!(
            cut_of(&tasks),
            (2, Some(Constraint::TrueDependence), Some(1))
        );
        // A reduction into an element still cuts a later read of another element.
        let tasks = vec![
            task(
                vec![],
                vec![
                    arg(2, 0, R),
                    element(1, 3, Privilege::Reduce(weft_ir::ReduceOp::Sum)),
                ],
            ),
            task(vec![], vec![element(1, 5, R), arg(3, 0, W)]),
        ];
        assert_eq!(cut_of(&tasks), (1, Some(Constraint::Reduction), Some(1)));
    }

    #[test]
    fn a_one_point_task_and_the_scalar_tasks_after_it_fuse_in_order() {
        // t = x[0..100] . y (one point, a 1-d view), then s = t * 2, then x[3] = s: a write
        // of an element of the vector the first task read whole.
        let tasks = vec![
            task(vec![], vec![arg(1, 1, R), arg(2, 1, R), arg(3, 0, W)]),
            task(vec![], vec![arg(3, 0, R), arg(4, 0, W)]),
            task(vec![], vec![arg(4, 0, R), element(1, 3, W)]),
        ];
        assert_eq!(fusible_prefix(&tasks), (3, None));
        assert_eq!(fused_launch(&tasks), &[] as &[u64]);
        // A multi-point task after them has another launch domain.
        let mut more = tasks.clone();
        more.push(task(vec![4], vec![arg(5, 1, R), arg(6, 1, W)]));
        assert_eq!(cut_of(&more), (3, Some(Constraint::LaunchDomain), None));
    }

    #[test]
    fn scalar_tasks_join_any_launch_domain() {
        let _ = PluginId(0);
        // v2 = v * v (0-d), then y = x * v2 over 4 points.
        let tasks = vec![
            task(
                vec![],
                vec![arg(1, 0, Privilege::Read), arg(2, 0, Privilege::Write)],
            ),
            task(
                vec![4],
                vec![
                    arg(3, 1, Privilege::Read),
                    arg(2, 0, Privilege::Read),
                    arg(4, 1, Privilege::Write),
                ],
            ),
        ];
        assert_eq!(fusible_prefix(&tasks), (2, None));
        assert_eq!(fused_launch(&tasks), &[4]);
    }

    #[test]
    fn a_scalar_task_that_is_not_idempotent_joins_only_one_point() {
        // n = sqrt(n) in place (0-d), then a reduction of x into m.
        let sum = Privilege::Reduce(weft_ir::ReduceOp::Sum);
        let in_place = || task(vec![], vec![arg(1, 0, Privilege::ReadWrite)]);
        let reduce =
            |launch: Vec<u64>| task(launch, vec![arg(3, 1, Privilege::Read), arg(2, 0, sum)]);
        let (n, cut) = fusible_prefix(&[in_place(), reduce(vec![4])]);
        assert_eq!(n, 1, "every point would take the square root again");
        assert_eq!(cut.map(|c| c.constraint), Some(Constraint::LaunchDomain));
        assert_eq!(fusible_prefix(&[in_place(), reduce(vec![1])]), (2, None));
        // The other order: the multi-point task first.
        let (n, _) = fusible_prefix(&[reduce(vec![4]), in_place()]);
        assert_eq!(n, 1);
        // Overwriting what an earlier scalar task read is not idempotent either: t = s; s = 1.
        let tasks = [
            task(
                vec![],
                vec![arg(5, 0, Privilege::Read), arg(6, 0, Privilege::Write)],
            ),
            task(vec![], vec![arg(5, 0, Privilege::Write)]),
            reduce(vec![4]),
        ];
        assert_eq!(fusible_prefix(&tasks).0, 2);
        // A task reading and writing one store through two arguments is not: s = s + 1.
        let tasks = [
            task(
                vec![],
                vec![arg(5, 0, Privilege::Read), arg(5, 0, Privilege::Write)],
            ),
            reduce(vec![4]),
        ];
        assert_eq!(fusible_prefix(&tasks).0, 1);
        // Pure scalar chains are: u = s * s; v = u + 1.
        let tasks = [
            task(
                vec![],
                vec![arg(5, 0, Privilege::Read), arg(6, 0, Privilege::Write)],
            ),
            task(
                vec![],
                vec![arg(6, 0, Privilege::Read), arg(7, 0, Privilege::Write)],
            ),
            reduce(vec![4]),
        ];
        assert_eq!(fusible_prefix(&tasks), (3, None));
    }

    #[test]
    fn a_fill_then_a_reduction_into_it_is_not_fused() {
        let sum = Privilege::Reduce(weft_ir::ReduceOp::Sum);
        let tasks = vec![
            task(vec![], vec![arg(9, 0, Privilege::Write)]),
            task(vec![4], vec![arg(3, 1, Privilege::Read), arg(9, 0, sum)]),
        ];
        let (n, cut) = fusible_prefix(&tasks);
        assert_eq!(n, 1);
        assert_eq!(
            cut,
            Some(Cut {
                constraint: Constraint::LaunchDomain,
                storage: Some(StorageId(9))
            })
        );
    }

    #[test]
    fn a_scalar_task_cannot_read_what_a_launch_reduced() {
        let sum = Privilege::Reduce(weft_ir::ReduceOp::Sum);
        let tasks = vec![
            task(vec![4], vec![arg(3, 1, Privilege::Read), arg(9, 0, sum)]),
            task(
                vec![],
                vec![arg(9, 0, Privilege::Read), arg(8, 0, Privilege::Write)],
            ),
        ];
        assert_eq!(fusible_prefix(&tasks).0, 1);
    }
}

#[cfg(test)]
mod deferral_tests {
    use super::*;
    use weft_runtime::view::ViewMap;

    use super::tests::{R, W, arg, cut_of, task};

    /// `out[i] = a[i]` (both touched pointwise, `out` written whole) or, with `gather`,
    /// `out[i] = a[0]` (`a` read elsewhere than at the loop's index).
    fn copy_kernel(gather: bool) -> std::sync::Arc<weft_runtime::KernelEntry> {
        let name = if gather { "t.gather" } else { "t.copy" };
        let mut k = weft_ir::KernelBuilder::new(name);
        let a = k.store(weft_ir::DType::F64, 1, R);
        let out = k.store(weft_ir::DType::F64, 1, W);
        k.parallel(out, |b, idx| {
            let v = if gather {
                let zero = b.const_i64(0);
                b.load(a, &[zero])
            } else {
                b.load(a, idx)
            };
            b.store(out, idx, v);
        });
        let ir = k.finish_validated().expect("valid");
        std::sync::Arc::new(weft_runtime::KernelEntry::new(name, &ir).expect("valid"))
    }

    /// The view `lo..lo+len` of a 1-d root of 100 elements, seen whole by one point.
    fn whole(lo: u64, len: u64) -> RootPartition {
        RootPartition {
            view: ViewMap::whole(&[100]).slice(&[lo], &[lo + len]).unwrap(),
            tiling: None,
            image: None,
        }
    }

    /// `t = grid[lo..lo+90]` then `grid[1..91] = t`, on `points` points.
    fn shifted_copy(lo: u64, points: u64, gather: bool) -> Vec<IndexTask> {
        let mut read = task(vec![arg(1, whole(lo, 90), R), arg(2, whole(0, 90), W)]);
        read.kernel = copy_kernel(gather);
        let mut write = task(vec![arg(2, whole(0, 90), R), arg(1, whole(1, 90), W)]);
        write.kernel = copy_kernel(false);
        for t in [&mut read, &mut write] {
            t.launch = weft_runtime::smallvec::smallvec![points];
        }
        vec![read, write]
    }

    #[test]
    fn a_write_over_what_was_read_a_few_rows_away_fuses_deferred() {
        let (n, cut, deferrals) = fusible_prefix_deferring(&shifted_copy(0, 1, false));
        assert_eq!((n, cut), (2, None));
        assert_eq!(
            deferrals,
            vec![Deferral {
                task: 1,
                arg: 1,
                halo: 1
            }]
        );
        let (n, _, deferrals) = fusible_prefix_deferring(&shifted_copy(5, 1, false));
        assert_eq!((n, deferrals[0].halo), (2, 4));
        // On several points too: each holds its tile's boundary rows back.
        let (n, _, deferrals) = fusible_prefix_deferring(&shifted_copy(0, 4, false));
        assert_eq!((n, deferrals.len()), (2, 1));
    }

    #[test]
    fn a_bounded_anti_dependence_still_cuts_otherwise() {
        // A shift past the halo, a read elsewhere than at the loop's index.
        for tasks in [shifted_copy(6, 1, false), shifted_copy(0, 1, true)] {
            assert_eq!(
                cut_of(&tasks),
                (1, Some(Constraint::AntiDependence), Some(1))
            );
        }
        // Nothing after the deferred write may touch its store.
        let mut tasks = shifted_copy(0, 1, false);
        let mut after = task(vec![arg(1, whole(0, 90), R), arg(3, whole(0, 90), W)]);
        after.launch = weft_runtime::smallvec::smallvec![1];
        tasks.push(after);
        assert_eq!(
            cut_of(&tasks),
            (2, Some(Constraint::TrueDependence), Some(1))
        );
    }

    #[test]
    fn bounded_shifts_count_rows_of_the_written_view() {
        // The interior (8 x 10) of a 10 x 12 grid, and views of it shifted by (di, dj).
        let grid = ViewMap::whole(&[10, 12]);
        let view = |di: i64, dj: i64| RootPartition {
            view: grid
                .slice(
                    &[(1 + di) as u64, (1 + dj) as u64],
                    &[(9 + di) as u64, (11 + dj) as u64],
                )
                .unwrap(),
            tiling: None,
            image: None,
        };
        let w = view(0, 0);
        assert_eq!(bounded_shift(&view(0, 0), &w), Some(0));
        assert_eq!(bounded_shift(&view(-1, 0), &w), Some(1));
        assert_eq!(bounded_shift(&view(1, 0), &w), Some(1));
        // A column shift may reach into the next row.
        assert_eq!(bounded_shift(&view(0, 1), &w), Some(1));
        assert_eq!(bounded_shift(&view(-1, -1), &w), Some(2));
        // Transposed: not a shift.
        let t = RootPartition {
            view: w.view.permute(&[1, 0]).unwrap(),
            tiling: None,
            image: None,
        };
        assert_eq!(bounded_shift(&t, &w), None);
    }

    /// A stencil's time step, as NPBench's `heat_3d` runs it: `b[1..91] = t` ends a step,
    /// `c = 2 * b[1..91]` starts the next one, and `u = b[0..90] - c` (reading `b` shifted)
    /// cuts the prefix. `c` is read by `u` through `read_c`.
    fn step(read_c: RootPartition) -> Vec<IndexTask> {
        vec![
            task(vec![arg(2, whole(0, 90), R), arg(1, whole(1, 90), W)]),
            task(vec![arg(1, whole(1, 90), R), arg(3, whole(0, 90), W)]),
            task(vec![
                arg(1, whole(0, 90), R),
                arg(3, read_c, R),
                arg(4, whole(0, 90), W),
            ]),
        ]
    }

    #[test]
    fn what_only_the_cutting_task_reads_is_left_for_it() {
        let tasks = step(whole(0, 90));
        let (n, cut, deferrals) = fusible_prefix_deferring(&tasks);
        assert_eq!(n, 2, "the shifted read of b cuts");
        assert_eq!(cut.map(|c| c.constraint), Some(Constraint::TrueDependence));
        assert_eq!(leave_for_consumer(&tasks[..2], &tasks[2], &deferrals), 1);
        // In the next window the two fuse, so `c` can be a temporary.
        assert_eq!(fusible_prefix(&tasks[1..]), (2, None));
    }

    #[test]
    fn a_tail_stays_when_its_consumer_reads_it_otherwise_or_others_touch_it() {
        // Read through another partition: in the next window they would not fuse either.
        let tasks = step(whole(1, 90));
        assert_eq!(leave_for_consumer(&tasks[..2], &tasks[2], &[]), 2);
        // Something earlier in the prefix reads `c`'s store.
        let mut tasks = step(whole(0, 90));
        tasks.insert(
            0,
            task(vec![arg(3, whole(0, 90), R), arg(5, whole(0, 90), W)]),
        );
        assert_eq!(leave_for_consumer(&tasks[..3], &tasks[3], &[]), 3);
        // The consumer overwrites what the tail reads.
        let mut tasks = step(whole(0, 90));
        tasks[2].args[0].privilege = Privilege::ReadWrite;
        assert_eq!(leave_for_consumer(&tasks[..2], &tasks[2], &[]), 2);
        // A tail that writes twice, or updates in place, stays.
        let mut tasks = step(whole(0, 90));
        tasks[1].args[0].privilege = Privilege::ReadWrite;
        assert_eq!(leave_for_consumer(&tasks[..2], &tasks[2], &[]), 2);
        // At least one task runs.
        let tasks = step(whole(0, 90));
        assert_eq!(leave_for_consumer(&tasks[1..2], &tasks[2], &[]), 1);
    }
}
