//! Fault isolation in the shared window: a task that fails takes down only the work that
//! depends on it, and every owner hears about its own work.
//!
//! Plugins that do not trust each other share one window, and their tasks fuse. A task can
//! fail (an index out of bounds, the kernel time limit, a kernel that does not compile), and
//! the window then:
//! - **poisons** the storages the failed task writes: they hold no value. A read of one
//!   returns the error (every time, until the host overwrites the whole storage or it dies);
//! - **skips** a later task that reads a poisoned storage. It poisons what it writes in
//!   turn, with an error of its own ([`Error::NotRun`]) that names its plugin, its task and
//!   the task whose failure it inherits;
//! - **runs every other task**: a task that does not read a poisoned storage runs as if
//!   nothing had failed, whoever submitted it. One that writes all of a poisoned storage
//!   gives it values again (so does the host, writing all of it);
//! - **attributes a fused task's failure to one task.** Before a fused task of several
//!   plugins runs, the storages whose earlier contents it reads and that it writes are copied
//!   (and no output takes over an input's buffer). If it fails, they are put back and its
//!   tasks run again one at a time: the failure lands on the task that fails unfused, and the
//!   others run. A fused task of one plugin is not copied first: if it fails, its tasks run
//!   again where running it clobbered nothing they read; otherwise what all of them write
//!   is lost, each with an error of its own that names the fused task;
//! - **reports** each failure once through [`Core::flush`] (the first one not yet
//!   reported), besides the reads of the storages it poisoned. A failure never reaches the
//!   caller of a `submit` that happened to run the failing task.
//!
//! On several ranks a failure still ends the job ([`crate::Distribution::fail`]): the
//! window returns it at once, as before.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use weft_ir::Privilege;

use crate::backend::BufferId;
use crate::core::Core;
use crate::stores::{StorageId, StoreId};
use crate::task::IndexTask;
use crate::{Error, Result};

/// The most failures kept for [`Core::flush`] to report; past it only a count is kept (a
/// hostile plugin could otherwise grow the list without bound).
pub const MAX_UNREPORTED: usize = 64;

/// Why a storage holds no value.
#[derive(Clone, Debug)]
struct Poison {
    /// The failure at the root of it.
    root: Arc<Error>,
    /// The error a read of the storage returns: the root itself, or the [`Error::NotRun`] of
    /// the task that wrote the storage and did not run.
    error: Arc<Error>,
}

/// The window's record of failures: poisoned storages and failures not yet reported.
#[derive(Debug, Default)]
pub struct Faults {
    poisoned: HashMap<StorageId, Poison>,
    unreported: Vec<Arc<Error>>,
    /// Failures past [`MAX_UNREPORTED`] that were not kept.
    uncounted: u64,
}

impl Faults {
    /// Whether any storage is poisoned.
    pub fn any_poisoned(&self) -> bool {
        !self.poisoned.is_empty()
    }

    /// Whether storage `id` is poisoned.
    pub fn is_poisoned(&self, id: StorageId) -> bool {
        self.poisoned.contains_key(&id)
    }
}

/// The bytes of storages a fused task may clobber, taken before it runs so that its tasks can
/// run again unfused: copies in buffers of the back end (so a device takes them without
/// waiting for its work), with their sizes; `None` for a storage with no buffer yet.
pub(crate) struct Snapshot(Vec<(StorageId, Option<(BufferId, u64)>)>);

/// The plugin part of a kernel name (`numeric.add` is `numeric`'s).
fn plugin_of(name: &str) -> String {
    name.split('.').next().unwrap_or_default().to_string()
}

impl Core {
    /// Runs `done`, the front of the window, as `fused` (when the planner fused it) or one
    /// task at a time, isolating failures (see the module documentation). `uses` counts the
    /// references the tasks run so far hold. Returns an error only for what is not a task's
    /// failure, or on several ranks.
    pub(crate) fn run_isolated(
        &mut self,
        done: &[IndexTask],
        fused: Option<&IndexTask>,
        uses: &mut crate::FastMap<StoreId, u32>,
    ) -> Result<()> {
        let count = |task: &IndexTask, uses: &mut crate::FastMap<StoreId, u32>| {
            for arg in &task.args {
                *uses.entry(arg.store).or_default() += 1;
            }
        };
        let touches_poison = |core: &Core| {
            core.faults.any_poisoned() && done.iter().any(|t| core.touches_poison(t).is_some())
        };
        let fused = fused.filter(|_| !touches_poison(self));
        if let Some(task) = fused {
            done.iter().for_each(|t| count(t, uses));
            // (A fused task carries its first task's plugin.)
            let several = done.iter().any(|t| t.plugin != task.plugin);
            // Several plugins: what the fused task may clobber is copied first, so that its
            // tasks can run again (and no output takes over an input's buffer).
            let snapshot = if several && self.distribution.is_none() {
                let ids = self.clobbered(done, task);
                Some(self.snapshot(ids)?)
            } else {
                None
            };
            let handed = self.stats.exec.buffers_handed_over;
            let Err(e) = self.execute(task, uses, snapshot.is_none()) else {
                if let Some(snapshot) = snapshot {
                    self.drop_snapshot(snapshot);
                }
                done.iter().for_each(|t| self.cure_written(t));
                return Ok(());
            };
            if self.distribution.is_some() {
                return Err(self.with_sites(e, done));
            }
            // One plugin: its tasks run again only where nothing they read was clobbered.
            let rerun = match snapshot {
                Some(snapshot) => {
                    self.restore(snapshot)?;
                    true
                }
                None => {
                    self.stats.exec.buffers_handed_over == handed
                        && self.clobbered(done, task).is_empty()
                }
            };
            if !rerun {
                let root = Arc::new(self.with_sites(e, done));
                self.record(root.clone());
                for t in done {
                    let lost = format!(
                        "lost: it ran fused in `{}`, which failed: {root}",
                        task.name()
                    );
                    self.poison_outputs(t, &root, Some(lost));
                }
                return Ok(());
            }
            // Find the failing task: the tasks run again, one at a time.
            uses.clear();
        }
        for t in done {
            count(t, uses);
            if let Some(poison) = self.touches_poison(t) {
                let root = poison.root.clone();
                let message = format!(
                    "not run: a store it uses holds no value since an earlier task failed: {root}"
                );
                self.poison_outputs(t, &root, Some(message));
                continue;
            }
            match self.execute(t, uses, true) {
                Ok(()) => self.cure_written(t),
                Err(e) if self.distribution.is_some() => {
                    return Err(self.with_sites(e, std::slice::from_ref(t)));
                }
                Err(e) => {
                    let root = Arc::new(self.with_sites(e, std::slice::from_ref(t)));
                    self.record(root.clone());
                    self.poison_outputs(t, &root, None);
                }
            }
        }
        Ok(())
    }

    /// `e`, naming where in the application `tasks` were asked for.
    pub(crate) fn with_sites(&self, e: Error, tasks: &[IndexTask]) -> Error {
        let mut sites: Vec<&str> = Vec::new();
        for site in tasks.iter().filter_map(|t| self.sites.get(&t.seq)) {
            if !sites.contains(&&**site) {
                sites.push(site);
            }
        }
        if sites.is_empty() {
            e
        } else {
            e.from_call_at(&sites.join(", "))
        }
    }

    /// The poison of a storage `task` reads (or reduces into), if any: a task that only
    /// writes a poisoned storage runs.
    fn touches_poison(&self, task: &IndexTask) -> Option<Poison> {
        task.args
            .iter()
            .filter(|a| a.privilege != Privilege::Write)
            .find_map(|a| self.faults.poisoned.get(&a.storage))
            .cloned()
    }

    /// Clears the poison of the storages that `task`, which ran, wrote whole.
    fn cure_written(&mut self, task: &IndexTask) {
        if !self.faults.any_poisoned() {
            return;
        }
        let poisoned = |a: &crate::task::TaskArg| {
            a.privilege == Privilege::Write && self.faults.is_poisoned(a.storage)
        };
        if !task.args.iter().any(poisoned) {
            return;
        }
        let whole =
            crate::executor::written_whole(&self.stores, self.mapping.as_ref(), self.rank, task);
        for (arg, whole) in task.args.iter().zip(whole) {
            if whole && arg.privilege == Privilege::Write {
                self.faults.poisoned.remove(&arg.storage);
            }
        }
    }

    /// Keeps a failure for [`Core::flush`] to report.
    fn record(&mut self, root: Arc<Error>) {
        if self.faults.unreported.len() < MAX_UNREPORTED {
            self.faults.unreported.push(root);
        } else {
            self.faults.uncounted += 1;
        }
    }

    /// Poisons the storages `task` writes or reduces into: with `root` itself, or, with
    /// `lost`, with an [`Error::NotRun`] of the task that says so.
    fn poison_outputs(&mut self, task: &IndexTask, root: &Arc<Error>, lost: Option<String>) {
        let error = match lost {
            None => root.clone(),
            Some(message) => Arc::new(self.with_sites(
                Error::NotRun {
                    plugin: plugin_of(task.name()),
                    kernel: task.name().to_string(),
                    message,
                },
                std::slice::from_ref(task),
            )),
        };
        for arg in task.args.iter().filter(|a| a.privilege.mutates()) {
            self.faults.poisoned.insert(
                arg.storage,
                Poison {
                    root: root.clone(),
                    error: error.clone(),
                },
            );
        }
    }

    /// The storages whose contents before `done` ran some task of `done` reads, and some
    /// task of it writes (not the fused task's temporaries): what running `done` may clobber
    /// that running it again needs. A storage that an earlier task of `done` writes whole
    /// before a task reads it is not one of them.
    fn clobbered(&self, done: &[IndexTask], fused: &IndexTask) -> Vec<StorageId> {
        let local: HashSet<StorageId> = fused
            .args
            .iter()
            .filter(|a| a.local)
            .map(|a| a.storage)
            .collect();
        let mut read_before = HashSet::new();
        let mut written = HashSet::new();
        let mut fresh = HashSet::new();
        for t in done {
            for arg in &t.args {
                if arg.privilege != Privilege::Write && !fresh.contains(&arg.storage) {
                    read_before.insert(arg.storage);
                }
            }
            let writes = t.args.iter().any(|a| a.privilege == Privilege::Write);
            let whole = if writes {
                crate::executor::written_whole(&self.stores, self.mapping.as_ref(), self.rank, t)
            } else {
                Vec::new()
            };
            for (k, arg) in t.args.iter().enumerate() {
                if arg.privilege.mutates() {
                    written.insert(arg.storage);
                }
                if arg.privilege == Privilege::Write && whole.get(k).copied().unwrap_or(false) {
                    fresh.insert(arg.storage);
                }
            }
        }
        let mut ids: Vec<StorageId> = read_before
            .intersection(&written)
            .filter(|s| !local.contains(s))
            .copied()
            .collect();
        ids.sort();
        ids
    }

    /// Copies of storages `ids` now, taken in the order of the back end's work.
    fn snapshot(&mut self, ids: Vec<StorageId>) -> Result<Snapshot> {
        let mut taken = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(storage) = self.stores.storage(id) else {
                continue;
            };
            let (buffer, bytes) = (storage.buffer(), storage.bytes());
            let copy = match buffer {
                Some(buffer) => {
                    let copy = self.backend.alloc_uninit(bytes)?;
                    if let Err(e) = self.backend.copy(buffer, copy, bytes) {
                        self.backend.free(copy);
                        self.drop_snapshot(Snapshot(taken));
                        return Err(e);
                    }
                    Some((copy, bytes))
                }
                None => None,
            };
            taken.push((id, copy));
        }
        Ok(Snapshot(taken))
    }

    /// Frees what [`Core::snapshot`] took, unused.
    fn drop_snapshot(&mut self, snapshot: Snapshot) {
        for (_, copy) in snapshot.0 {
            if let Some((buffer, _)) = copy {
                self.backend.free(buffer);
            }
        }
    }

    /// Puts back what [`Core::snapshot`] took.
    fn restore(&mut self, snapshot: Snapshot) -> Result<()> {
        let mut result = Ok(());
        for (id, copy) in snapshot.0 {
            match copy {
                Some((copy, bytes)) => {
                    if result.is_ok() {
                        result = self
                            .stores
                            .ensure_buffer(id, self.backend.as_mut())
                            .and_then(|buffer| self.backend.copy(copy, buffer, bytes));
                    }
                    self.backend.free(copy);
                }
                None => {
                    let freed = self.stores.discard_buffers(id);
                    self.free(freed);
                }
            }
            self.stores.forget_indices(id);
            self.stores.written(id);
        }
        result
    }

    /// The error a read of storage `id` returns, if a failure poisoned it. It counts as
    /// reported: [`Core::flush`] does not report its root again.
    pub(crate) fn poison_error(&mut self, id: StorageId) -> Option<Error> {
        let poison = self.faults.poisoned.get(&id)?.clone();
        self.faults
            .unreported
            .retain(|e| !Arc::ptr_eq(e, &poison.root));
        Some((*poison.error).clone())
    }

    /// Poisons the storage of store `id` with `error`, at this point of the program: an
    /// update of it failed before any task could carry the failure (an in-place operator
    /// whose operands do not fit), so a read of the storage, through any store on it, returns
    /// `error`, and the tasks that read it do not run, as after a failed task. The tasks
    /// pending before run first, so that none of them cures it out of order.
    pub fn poison(&mut self, id: StoreId, error: Error) -> Result<()> {
        let storage = self.stores.get(id)?.storage;
        self.flush_for(storage, true)?;
        let error = Arc::new(error);
        self.faults.poisoned.insert(
            storage,
            Poison {
                root: error.clone(),
                error,
            },
        );
        Ok(())
    }

    /// Clears the poison of storage `id`: the host overwrote all of it.
    pub(crate) fn cure(&mut self, id: StorageId) {
        self.faults.poisoned.remove(&id);
    }

    /// Forgets the poison of storages that died.
    pub(crate) fn forget_dead_poison(&mut self) {
        if self.faults.any_poisoned() {
            let stores = &self.stores;
            self.faults
                .poisoned
                .retain(|&id, _| stores.storage(id).is_some());
        }
    }

    /// The first failure not yet reported (with how many more there were), and forgets them
    /// all.
    pub(crate) fn take_fault(&mut self) -> Option<Error> {
        let mut all = std::mem::take(&mut self.faults.unreported).into_iter();
        let first = all.next()?;
        let more = all.len() as u64 + std::mem::take(&mut self.faults.uncounted);
        let first = (*first).clone();
        Some(if more == 0 {
            first
        } else {
            first.with_more_failures(more)
        })
    }

    /// The window's failures: poisoned storages and what is not yet reported.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }
}
