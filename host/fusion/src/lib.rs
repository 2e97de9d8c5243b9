//! Task fusion (Diffuse, sections 4 and 5), as a [`Planner`] of `weft-runtime`: the longest fusible prefix of a window, temporary
//! stores, the fused task, and memoization of all of it.
//!
//! [`Fuser::analyse`] looks at a window of pending tasks and returns a [`Plan`]: how many tasks
//! at the front fuse, why the window was cut there, which stores become task-local, and (for
//! more than one task) the fused kernel and where each of its arguments comes from. Its
//! [`Planner`] implementation turns that into the fused task the runtime runs. Plans are
//! memoized by the window's canonical form ([`canonical`]), so a loop in steady state neither
//! analyses nor compiles anything. The form keeps only which of the window's extents, offsets
//! and strides are equal, so a loop whose views move or grow each step also plans once. A
//! window seen before exactly skips even the constraint scan: its exact form keys a second
//! memo, and a hit there costs writing the form down and a table look-up.
//!
//! It depends on `weft-runtime` (whose seam it implements) and `weft-ir`, never on a back end
//! or the plugin host. Its errors are the runtime's: composing a fused kernel fails only on a
//! bug in Weft.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod canonical;
pub mod constraints;
pub mod explain;
pub mod temporaries;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use weft_ir::passes::compose::{Part, compose};
use weft_ir::passes::{FusionFacts, optimize};
use weft_ir::{Param, Privilege};
use weft_runtime::partition::RootPartition;
use weft_runtime::planner::{Plan, PlanContext, Planner, PlannerStats};
use weft_runtime::stores::{StorageId, Stores};
use weft_runtime::task::{IndexTask, TaskArg};
use weft_runtime::{BoundedCache, CacheLimits, CacheStats, Error, KernelEntry, Owner, Result};

use constraints::{
    Constraint, Cut, Deferral, fusible_prefix, fusible_prefix_deferring, leave_for_consumer,
};
use explain::Explanation;

/// The planner's counters (the runtime's [`PlannerStats`]).
pub type FusionStats = PlannerStats;

/// Where one argument of a fused task comes from.
#[derive(Clone, Debug)]
pub struct ArgSource {
    /// Index of the task in the prefix.
    pub task: usize,
    /// Index of the argument in that task.
    pub arg: usize,
    /// The merged privilege.
    pub privilege: Privilege,
    /// Whether the argument is a temporary (task-local scratch).
    pub local: bool,
    /// `Some(halo)` when its stores are deferred (fused through a bounded anti-dependence,
    /// see [`constraints::Deferral`]).
    pub deferred: Option<u32>,
}

/// The fused task of a prefix of more than one task.
#[derive(Debug)]
pub struct Fused {
    /// Store arguments, in kernel-parameter order.
    pub args: Vec<ArgSource>,
    /// Scalar arguments: (task, scalar index), in kernel-parameter order.
    pub scalars: Vec<(usize, usize)>,
    /// The fused kernel (compiled on first use).
    pub kernel: Arc<KernelEntry>,
}

/// What to do with the front of a window.
#[derive(Debug)]
pub struct FusionPlan {
    /// How many tasks at the front fuse (at least one).
    pub prefix: usize,
    /// The fused task, when `prefix > 1`.
    pub fused: Option<Fused>,
    /// Why the window was cut, for explanations.
    pub explanation: Explanation,
    /// The kernels of the prefix's tasks, in order: a memo hit is used only when the window's
    /// tasks run these very kernels (the key names kernels by id; this confirms the id).
    pub kernels: Vec<Arc<KernelEntry>>,
}

/// A plan and how it was found.
pub struct Planned {
    /// The plan.
    pub plan: Arc<FusionPlan>,
    /// The prefix's canonical key (it names the stores of this window).
    pub key: canonical::Key,
    /// Whether the plan came from the memo.
    pub hit: bool,
}

/// The tasks at the front of a window that decided its plan: the scan never looked past
/// them. The prefix's cut is the last of them; or, when no task cut it, they are the tasks up
/// to one past the kernel limits, or the whole window (`ends`: then where the window ended
/// decided the prefix too, and the form says so).
#[derive(Clone, Copy, Debug)]
struct Decided {
    len: usize,
    ends: bool,
}

/// The hash of a task's kernel id.
fn kernel_hash(task: &IndexTask) -> u64 {
    std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, task.kernel.id().words())
}

/// A plan found for a window, kept by the window's exact form.
struct WindowEntry {
    plan: Arc<FusionPlan>,
    /// The prefix's canonical key.
    key: Arc<[u64]>,
    /// How many of the exact form's stores the prefix names (its first ones).
    named: usize,
}

/// The bounds of the memo of plans by default, and of the window memo: 16,384 entries and
/// 256 MiB each (keys, fused kernels' IR and explanations, estimated). A loop whose windows
/// differ in their numbers makes one window-memo entry per window of a pass: NPBench's
/// `trisolv` at `M` makes 10,000, which 4,096 entries evicted before they came round again.
pub const MEMO_LIMITS: CacheLimits = CacheLimits {
    entries: 16384,
    bytes: 256 << 20,
};

/// The fusion layer's state: the memo of plans, bounded ([`MEMO_LIMITS`]), each plan charged
/// to the plugin of the first task of its prefix.
pub struct Fuser {
    memo: BoundedCache<Arc<[u64]>, Arc<FusionPlan>>,
    /// The window memo: plans by the exact form of the scanned window ([`canonical::exact`]).
    /// A window seen before (a time step, the same chain again) takes its plan from here
    /// without the constraint scan, the temporaries or the canonical key. Bounded like the
    /// memo.
    windows: BoundedCache<Arc<[u64]>, Arc<WindowEntry>>,
    /// Hashes of the exact forms of the windows analysed lately, in two generations of at
    /// most the window memo's entries each: a window enters the window memo when it is seen
    /// again while its first sighting is still in one of them. So windows that never repeat,
    /// or repeat only after more windows than the memo could keep (a loop whose views move
    /// every step), cost a hash each, not an entry that would be evicted unused.
    seen: [weft_runtime::FastSet<u64>; 2],
    /// Per first kernel of a window (its id, hashed), the last four lengths of the tasks
    /// that decided such windows' plans (0: none): the lengths at which the window memo is
    /// looked up. Cleared when it holds more kernels than the window memo holds entries.
    lengths: weft_runtime::FastMap<u64, [usize; 4]>,
    /// The fused kernels that plans hold, by id: plans that make the same kernel (they differ
    /// only in extents or tiles) share one entry, so that back ends confirm their cache hits
    /// by identity rather than by comparing IR. Entries die with the last plan holding them.
    fused: HashMap<weft_runtime::KernelId, std::sync::Weak<KernelEntry>>,
    /// Counters.
    pub stats: FusionStats,
}

impl Default for Fuser {
    fn default() -> Self {
        Fuser::with_limits(MEMO_LIMITS)
    }
}

impl Fuser {
    /// A fuser whose memo holds at most `limits`.
    pub fn with_limits(limits: CacheLimits) -> Fuser {
        Fuser {
            memo: BoundedCache::new(limits),
            windows: BoundedCache::new(limits),
            seen: Default::default(),
            lengths: weft_runtime::FastMap::default(),
            fused: HashMap::new(),
            stats: FusionStats::default(),
        }
    }

    /// The shared entry of a fused kernel: an earlier plan's, when it is the same kernel.
    fn intern(&mut self, kernel: KernelEntry) -> Arc<KernelEntry> {
        if let Some(old) = self
            .fused
            .get(&kernel.id())
            .and_then(std::sync::Weak::upgrade)
            && old.same_kernel(&kernel)
        {
            return old;
        }
        if self.fused.len() >= 2 * self.memo.limits().entries {
            self.fused.retain(|_, w| w.strong_count() > 0);
        }
        let kernel = Arc::new(kernel);
        self.fused.insert(kernel.id(), Arc::downgrade(&kernel));
        kernel
    }

    /// Whether a window of exact form `hash` was seen lately (see `seen`); notes it as seen
    /// now.
    fn seen_lately(&mut self, hash: u64) -> bool {
        let [current, older] = &mut self.seen;
        if current.contains(&hash) || older.contains(&hash) {
            return true;
        }
        if current.len() >= self.windows.limits().entries {
            std::mem::swap(current, older);
            current.clear();
        }
        current.insert(hash);
        false
    }

    /// The memo's counters.
    pub fn memo_stats(&self) -> CacheStats {
        self.memo.stats()
    }
}

/// What a plan is charged in the memo: its key, and its fused kernel's IR and explanation,
/// estimated from their sizes.
fn plan_bytes(key: &[u64], plan: &FusionPlan) -> u64 {
    let insts = plan.fused.as_ref().map_or(0, |f| f.kernel.insts());
    (key.len() as u64 * 8)
        .saturating_add(insts as u64 * 64)
        .saturating_add(plan.kernels.len() as u64 * 16)
        .saturating_add(1024)
}

impl Fuser {
    /// The plan for the front of `window` (which must not be empty). `readers` gives, per
    /// storage, how many arguments of pending tasks (anywhere, the prefix's included) read or
    /// reduce it.
    ///
    /// Two memos. A window seen before exactly (its exact form, [`canonical::exact`]: a time
    /// step, the same chain again) takes the plan it got then, at the cost of writing down
    /// that form and one look-up. Otherwise the constraint check and the temporaries run
    /// (they are linear in the prefix and never look at points), and everything after them
    /// (the fused task and kernel, compilation) is memoized by the prefix's canonical form,
    /// which keeps which of its numbers are equal, not their values (see [`canonical`]).
    pub fn analyse(
        &mut self,
        window: &[IndexTask],
        stores: &Stores,
        readers: &weft_runtime::FastMap<StorageId, u32>,
    ) -> Result<Planned> {
        // A prefix whose fused kernel would pass the limits every kernel is held to stops
        // short of them (its cut is then the limit, not a constraint). The constraint check
        // looks one task past that limit and no further (it scans forward and stops at the
        // first cut, so the tasks after that one cannot change its answer): a long window is
        // planned in limit-sized prefixes, each at a cost linear in its own length.
        let limit = within_kernel_limits(window).max(1);
        let scan = &window[..(limit + 1).min(window.len())];
        // A window seen before, exactly, takes the plan it got then. Its form covers the
        // tasks that decided that plan (see `Decided`): one of the few lengths that plans of
        // windows starting with this kernel were decided by.
        let first = kernel_hash(&scan[0]);
        let candidates = self.lengths.get(&first).copied().unwrap_or_default();
        for len in candidates.into_iter().filter(|&l| l > 0 && l <= scan.len()) {
            let deciding = &scan[..len];
            let mut form = canonical::exact(deciding, stores, readers);
            form.words.push(0);
            let ends = len == window.len();
            if let Some(planned) = self.window_hit(&form, deciding) {
                return Ok(planned);
            }
            if ends {
                form.words.pop();
                form.words.push(1);
                if let Some(planned) = self.window_hit(&form, deciding) {
                    return Ok(planned);
                }
            }
        }
        let (planned, decided) = self.analyse_scan(window, scan, limit, stores, readers)?;
        let lengths = self.lengths.entry(first).or_default();
        if !lengths.contains(&decided.len) {
            lengths.rotate_right(1);
            lengths[0] = decided.len;
        }
        if self.lengths.len() > self.windows.limits().entries {
            self.lengths.clear();
        }
        let mut form = canonical::exact(&scan[..decided.len], stores, readers);
        form.words.push(u64::from(decided.ends));
        let hash = std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, &form.words);
        if !self.seen_lately(hash) {
            return Ok(planned);
        }
        let owner = Owner(scan.first().map_or(u32::MAX, |t| t.plugin.0));
        // Charged the plan too: the entry may keep it alive after the memo let it go.
        let bytes = (form.words.len() as u64 * 8)
            .saturating_add(plan_bytes(&planned.key.words, &planned.plan));
        let entry = WindowEntry {
            plan: planned.plan.clone(),
            key: planned.key.words.clone(),
            named: planned.key.storages.len(),
        };
        self.windows
            .insert(form.words.into(), Arc::new(entry), owner, bytes);
        Ok(planned)
    }

    /// The plan of the window memo for the window whose deciding tasks are `deciding`, of
    /// exact form `form` (with its end word), if it holds one for these very kernels.
    fn window_hit(&mut self, form: &canonical::Exact, deciding: &[IndexTask]) -> Option<Planned> {
        let entry = self.windows.get(form.words.as_slice())?;
        let same = entry.plan.kernels.len() <= deciding.len()
            && entry
                .plan
                .kernels
                .iter()
                .zip(deciding)
                .all(|(k, t)| k.same_kernel(&t.kernel));
        if !same {
            return None;
        }
        let planned = Planned {
            plan: entry.plan.clone(),
            key: canonical::Key {
                words: entry.key.clone(),
                storages: form.storages[..entry.named.min(form.storages.len())].to_vec(),
            },
            hit: true,
        };
        self.stats.memo_hits += 1;
        self.stats.window_hits += 1;
        Some(planned)
    }

    /// [`Fuser::analyse`] of a window not in the window memo: `scan` is the window's first
    /// tasks up to one past the kernel limits (`limit` tasks).
    fn analyse_scan(
        &mut self,
        window: &[IndexTask],
        scan: &[IndexTask],
        limit: usize,
        stores: &Stores,
        readers: &weft_runtime::FastMap<StorageId, u32>,
    ) -> Result<(Planned, Decided)> {
        let (prefix, cut, deferrals) = fusible_prefix_deferring(scan);
        let decided = if prefix < scan.len() {
            // Cut at task `prefix`: the scan never looked past it.
            Decided {
                len: prefix + 1,
                ends: false,
            }
        } else {
            // The whole scan fuses: capped by the kernel limits when the window goes on
            // past it, else it is the whole window, and its end decided the prefix.
            Decided {
                len: scan.len(),
                ends: scan.len() == window.len(),
            }
        };
        let prefix = prefix.clamp(1, window.len().max(1)).min(window.len());
        let capped = limit.min(prefix);
        let (prefix, cut, capped) = if capped < prefix {
            (capped, None, true)
        } else {
            (prefix, cut, false)
        };
        // A tail that only makes what the cutting task reads waits for it (see
        // `leave_for_consumer`); what it looks at is within the deciding tasks.
        let (prefix, cut) = match (cut, window.get(prefix)) {
            (Some(cut), Some(next)) => {
                let kept = leave_for_consumer(&window[..prefix], next, &deferrals);
                if kept < prefix {
                    let left = Cut {
                        constraint: Constraint::Consumer,
                        storage: None,
                    };
                    (kept, Some(left))
                } else {
                    (prefix, Some(cut))
                }
            }
            (cut, _) => (prefix, cut),
        };
        let tasks = &window[..prefix];
        // A store is read after the prefix if pending tasks outside it read it (they may be
        // earlier in program order, after a partial flush, or later).
        let mut inside: HashMap<StorageId, u32> = HashMap::new();
        for a in tasks.iter().flat_map(|t| &t.args) {
            if !matches!(a.privilege, Privilege::Write) {
                *inside.entry(a.storage).or_insert(0) += 1;
            }
        }
        let read_after = |s: StorageId| {
            readers.get(&s).copied().unwrap_or(0) > inside.get(&s).copied().unwrap_or(0)
        };
        // What needs arithmetic on the prefix's numbers is decided before the lookup and
        // keyed: the deferred writes (above) and the temporaries (see `canonical`).
        let deferrals: Vec<Deferral> = if prefix > 1 {
            deferrals.into_iter().filter(|d| d.task < prefix).collect()
        } else {
            Vec::new()
        };
        let temps = temporaries::temporaries(
            tasks,
            |s| stores.storage_live(s),
            read_after,
            |s| stores.storage(s).map(|st| st.shape.as_slice()),
        );
        let key = canonical::key(tasks, cut.as_ref(), &deferrals, &temps, stores, read_after);
        // A hit counts only when the window runs the plan's very kernels (the key names
        // them by id); anything else is analysed anew, and its plan replaces the entry.
        if let Some(plan) = self.memo.get(&key.words)
            && plan.kernels.len() == tasks.len()
            && plan
                .kernels
                .iter()
                .zip(tasks)
                .all(|(k, t)| k.same_kernel(&t.kernel))
        {
            self.stats.memo_hits += 1;
            let planned = Planned {
                plan: plan.clone(),
                key,
                hit: true,
            };
            return Ok((planned, decided));
        }
        let start = Instant::now();
        let mut explanation = Explanation::new(tasks, window.get(prefix), cut, &temps, &key);
        explanation.capped = capped;
        explanation.set_deferred(tasks, &deferrals, &key);
        let fused = if prefix > 1 {
            self.build(tasks, &temps, &deferrals, &key, &mut explanation)?
        } else {
            None
        };
        // Without a fused kernel (a prefix of one, or a fused kernel past the limits), the
        // first task runs alone.
        let prefix = if fused.is_some() {
            self.stats.kernels_fused += 1;
            prefix
        } else {
            explanation.too_big = prefix > 1;
            1
        };
        let plan = Arc::new(FusionPlan {
            prefix,
            fused,
            explanation,
            kernels: tasks.iter().map(|t| t.kernel.clone()).collect(),
        });
        self.stats.analyses += 1;
        self.stats.analysis_seconds += start.elapsed().as_secs_f64();
        let owner = Owner(tasks.first().map_or(u32::MAX, |t| t.plugin.0));
        let bytes = plan_bytes(&key.words, &plan);
        self.memo
            .insert(key.words.clone(), plan.clone(), owner, bytes);
        let planned = Planned {
            plan,
            key,
            hit: false,
        };
        Ok((planned, decided))
    }

    /// Builds the fused task of `tasks`: deduplicated arguments with merged privileges, the
    /// composed kernel, and the kernel passes.
    fn build(
        &mut self,
        tasks: &[IndexTask],
        temps: &[StorageId],
        deferrals: &[Deferral],
        key: &canonical::Key,
        explanation: &mut Explanation,
    ) -> Result<Option<Fused>> {
        // One fused argument per distinct (storage, partition, reduction-or-not), and one of
        // its own for each deferred write (its stores land apart from every load).
        let mut args: Vec<ArgSource> = Vec::new();
        let mut arg_keys: Vec<(StorageId, &RootPartition, bool, Option<usize>)> = Vec::new();
        let mut parts_params: Vec<Vec<u32>> = Vec::with_capacity(tasks.len());
        for (t, task) in tasks.iter().enumerate() {
            let mut map = Vec::new();
            for (a, arg) in task.args.iter().enumerate() {
                let reduces = matches!(arg.privilege, Privilege::Reduce(_));
                let deferral = deferrals.iter().position(|d| d.task == t && d.arg == a);
                let local = temps.contains(&arg.storage);
                let k = (arg.storage, &arg.root_partition, reduces, deferral);
                let index = match arg_keys.iter().position(|x| *x == k) {
                    Some(i) => {
                        args[i].privilege = merge(args[i].privilege, arg.privilege);
                        i
                    }
                    None => {
                        arg_keys.push(k);
                        args.push(ArgSource {
                            task: t,
                            arg: a,
                            privilege: arg.privilege,
                            local,
                            deferred: deferral.filter(|_| !local).map(|d| deferrals[d].halo),
                        });
                        args.len() - 1
                    }
                };
                map.push(index as u32);
            }
            parts_params.push(map);
        }
        // Scalars follow the stores, part by part.
        let mut scalars = Vec::new();
        for (t, task) in tasks.iter().enumerate() {
            for s in 0..task.scalars.len() {
                parts_params[t].push((args.len() + scalars.len()) as u32);
                scalars.push((t, s));
            }
        }
        let entries: Vec<&KernelEntry> = tasks.iter().map(|t| &*t.kernel).collect();
        let mut params: Vec<Param> = args
            .iter()
            .map(|src| {
                let arg = &tasks[src.task].args[src.arg];
                let (dtype, rank) = store_param(entries[src.task], src.arg)
                    .unwrap_or((weft_ir::DType::F64, arg.root_partition.rank() as u32));
                Param::Store {
                    dtype,
                    rank,
                    privilege: src.privilege,
                }
            })
            .collect();
        for &(t, s) in &scalars {
            params.push(Param::Scalar {
                dtype: tasks[t].scalars[s].dtype(),
            });
        }
        let name = fused_name(&entries);
        // Scalar tasks first (the constraints allow it), so that the loops of the multi-point
        // tasks end up adjacent and can fuse; on one point, every task in program order (the
        // constraints allow no other there).
        let one_point = tasks.iter().all(|t| t.launch.is_empty());
        let mut order: Vec<usize> = (0..tasks.len()).collect();
        if !one_point {
            order.sort_by_key(|&t| !constraints::is_scalar_task(&tasks[t]));
        }
        let parts: Vec<Part<'_>> = order
            .iter()
            .map(|&t| Part {
                kernel: entries[t].ir(),
                params: parts_params[t].clone(),
            })
            .collect();
        let composed = compose(name.clone(), params, &parts).map_err(|e| Error::Compile {
            kernel: name.clone(),
            message: format!("composing the fused kernel: {e}"),
        })?;
        let facts = FusionFacts {
            class: iteration_classes(tasks, &args, scalars.len()),
            local: args
                .iter()
                .map(|a| a.local)
                .chain(std::iter::repeat_n(false, scalars.len()))
                .collect(),
            // Arguments on one root storage may overlap; others never do.
            alias: arg_keys
                .iter()
                .map(|(storage, _, _, _)| {
                    arg_keys
                        .iter()
                        .position(|(s, _, _, _)| s == storage)
                        .map(|i| i as u32)
                })
                .chain(std::iter::repeat_n(None, scalars.len()))
                .collect(),
            deferred: args
                .iter()
                .map(|a| a.deferred.is_some())
                .chain(std::iter::repeat_n(false, scalars.len()))
                .collect(),
            one_point,
        };
        let optimized = optimize(&composed, &facts);
        let roles = args
            .iter()
            .map(|a| {
                let arg = &tasks[a.task].args[a.arg];
                (
                    key.index_of(arg.storage),
                    format!("argument {} of {}", a.arg, tasks[a.task].name()),
                )
            })
            .collect();
        explanation.set_passes(optimized.report.to_string(), roles);
        let part_kernels: Vec<&weft_ir::Kernel> = parts.iter().map(|p| p.kernel).collect();
        explanation.set_loops(&part_kernels, &order, &composed, &optimized);
        let ir = weft_ir::passes::math::lower_math(&optimized.kernel);
        // A fused kernel past the limits every kernel is held to (many tasks with many
        // arguments) is not made: the tasks run apart.
        if weft_ir::validate::check_limits(&ir).is_err() {
            return Ok(None);
        }
        // Named by the hash of its content: plans that differ only in extents or tiles make
        // the same fused kernel, and share its compiled code.
        let kernel = KernelEntry::from_passes(ir)?;
        // Keep only the arguments whose parameters survived the passes.
        let map = &optimized.param_map;
        let kept_args: Vec<ArgSource> = args
            .into_iter()
            .enumerate()
            .filter(|(i, _)| map.get(*i).copied().flatten().is_some())
            .map(|(_, a)| a)
            .collect();
        let store_count = map.len() - scalars.len();
        let kept_scalars: Vec<(usize, usize)> = scalars
            .into_iter()
            .enumerate()
            .filter(|(i, _)| map.get(store_count + *i).copied().flatten().is_some())
            .map(|(_, s)| s)
            .collect();
        explanation.set_vanished(kept_args.iter().filter(|a| a.local).count());
        Ok(Some(Fused {
            args: kept_args,
            scalars: kept_scalars,
            kernel: self.intern(kernel),
        }))
    }
}

/// The most instructions (math lowered, as every kernel is at intake) that the tasks launched
/// on one point (scalar tasks, [`constraints::is_scalar_task`], and one-point tasks such as
/// short dot products) of one fused kernel hold together. A long chain of them (a scalar recurrence such as NPBench's
/// `trace += tanh(a[i, i])`) fuses into one straight-line body whose compile time grows with
/// its length while what fusing it saves, a launch per task, does not: `go_fast` at `M`
/// compiled its four kernels, two of them 256-task chains, in about 70 ms of a 170-195 ms
/// first run (its steady run 37-41 ms); with windows of 64 tasks no kernel took more than
/// about 6 ms. Past this budget the prefix ends, at the cost of one more launch per budget's
/// worth of scalar work.
pub const SCALAR_INSTS_BUDGET: usize = 2048;

/// The longest prefix of `tasks` whose fused kernel stays within `weft_ir`'s limits on
/// parameters and instructions, counting every argument and scalar and every instruction of
/// every task (the fused kernel has no more: arguments merge and passes only remove), and
/// whose one-point tasks stay within [`SCALAR_INSTS_BUDGET`].
fn within_kernel_limits(tasks: &[IndexTask]) -> usize {
    let (mut params, mut insts, mut scalar_insts) = (0usize, 0usize, 0usize);
    for (i, t) in tasks.iter().enumerate() {
        params += t.args.len() + t.scalars.len();
        insts += t.kernel.insts();
        if t.launch.is_empty() {
            scalar_insts += t.kernel.insts();
        }
        if params > weft_ir::semantics::MAX_PARAMS
            || insts > weft_ir::semantics::MAX_INSTS
            || scalar_insts > SCALAR_INSTS_BUDGET
        {
            return i;
        }
    }
    tasks.len()
}

/// The dtype and rank of a kernel's `index`-th store parameter.
fn store_param(entry: &KernelEntry, index: usize) -> Option<(weft_ir::DType, u32)> {
    entry
        .ir()
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Store { dtype, rank, .. } => Some((*dtype, *rank)),
            Param::Scalar { .. } => None,
        })
        .nth(index)
}

/// The privilege of an argument seen with `a` and then `b`.
fn merge(a: Privilege, b: Privilege) -> Privilege {
    match (a, b) {
        (x, y) if x == y => x,
        (Privilege::Reduce(op), _) | (_, Privilege::Reduce(op)) => Privilege::Reduce(op),
        _ => Privilege::ReadWrite,
    }
}

/// `fused(part+part+...)`, with the parts' provenance.
fn fused_name(entries: &[&KernelEntry]) -> String {
    const SHOWN: usize = 12;
    let mut names: Vec<&str> = entries.iter().take(SHOWN).map(|e| e.name()).collect();
    let more;
    if entries.len() > SHOWN {
        more = format!("{} more", entries.len() - SHOWN);
        names.push(&more);
    }
    format!("fused({})", names.join("+"))
}

/// What decides a partition's sub-store extents at every point: the view's extent, the tile,
/// offset relative to the view, and projection of its tiling, and an image's source.
type ExtentShape = (
    weft_runtime::Dims<u64>,
    Option<weft_runtime::partition::Tiling>,
    Option<weft_runtime::partition::Image>,
);

/// Arguments with equal sub-store extents at every point share a class: same view shape, same
/// tiling of it, and the same image source (images of one source through one partition give
/// equal ranges to every point).
fn iteration_classes(tasks: &[IndexTask], args: &[ArgSource], scalars: usize) -> Vec<Option<u32>> {
    let mut shapes: Vec<ExtentShape> = Vec::new();
    let mut classes = Vec::with_capacity(args.len() + scalars);
    for src in args {
        let p = &tasks[src.task].args[src.arg].root_partition;
        let shape = (
            p.view.shape.clone(),
            p.tiling.clone(),
            p.image.as_deref().cloned(),
        );
        let class = match shapes.iter().position(|s| *s == shape) {
            Some(i) => i,
            None => {
                shapes.push(shape);
                shapes.len() - 1
            }
        };
        classes.push(Some(class as u32));
    }
    classes.extend(std::iter::repeat_n(None, scalars));
    classes
}

/// The fused task of `plan` over the tasks it was made for.
pub fn instantiate(plan: &FusionPlan, tasks: &[IndexTask]) -> Option<IndexTask> {
    let fused = plan.fused.as_ref()?;
    let first = tasks.first()?;
    let args = fused
        .args
        .iter()
        .map(|src| {
            let arg = &tasks[src.task].args[src.arg];
            TaskArg {
                privilege: src.privilege,
                local: src.local,
                deferred: src.deferred,
                ..arg.clone()
            }
        })
        .collect();
    let scalars = fused
        .scalars
        .iter()
        .map(|&(t, s)| tasks[t].scalars[s])
        .collect();
    Some(IndexTask {
        seq: first.seq,
        plugin: first.plugin,
        kernel: fused.kernel.clone(),
        launch: constraints::fused_launch(tasks).to_vec().into(),
        args,
        scalars,
    })
}

/// The cut of a plan, if any (for tests and explanations).
pub fn cut_of(plan: &FusionPlan) -> Option<&Cut> {
    plan.explanation.cut.as_ref()
}

impl Planner for Fuser {
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize {
        fusible_prefix(window).0
    }

    fn plan(&mut self, window: &[IndexTask], context: &PlanContext<'_>) -> Result<Plan> {
        let planned = self.analyse(window, context.stores, context.readers)?;
        let prefix = planned.plan.prefix;
        let fused = instantiate(&planned.plan, &window[..prefix]);
        let label = |s| {
            context
                .stores
                .storage(s)
                .and_then(|st| st.label.as_deref().map(str::to_string))
        };
        let explanation = context.explain.then(|| {
            planned
                .plan
                .explanation
                .render(&planned.key, planned.hit, &label)
        });
        let summary = context.summarize.then(|| {
            planned
                .plan
                .explanation
                .summary(window, prefix, &planned.key, &label, context.sites)
        });
        Ok(Plan {
            prefix,
            fused,
            explanation,
            summary,
        })
    }

    fn stats(&self) -> PlannerStats {
        let memo = self.memo.stats();
        PlannerStats {
            memo_entries: memo.entries as u64,
            memo_evictions: memo.evictions,
            window_entries: self.windows.stats().entries as u64,
            ..self.stats
        }
    }
}
