//! Worker pools that several back ends share: one per host, for tenants that each have their
//! own runtime (their own plugins, stores, quotas and kernel time limit) but should not each
//! bring a thread per core.
//!
//! **Fairness.** A parallel loop without reductions or deferred stores, and a product with few
//! columns (`product::by_columns`), runs its chunks on the launching thread, which starts at once, and on helper jobs queued on the pool, at most one
//! per worker, each taking chunks of that launch only until none is left (see
//! `crate::shared_chunks`); other loops enter the pool as one job (rayon's `install`). Jobs
//! from outside wait in one first-in, first-out queue. Each tenant's thread waits for its own launch, so
//! it has at most one launch's helpers queued: a tenant waits at most for the helpers queued
//! ahead of its own, one launch per other tenant, and with
//! [`weft_runtime::Limits::kernel_time`] set each of those stops at the limit; meanwhile its
//! own thread runs its chunks.

use std::sync::Arc;

use crate::{Error, Result};

/// A pool of worker threads that back ends share (see the module documentation). Clones
/// share the one pool.
#[derive(Clone)]
pub struct WorkerPool {
    pool: Arc<rayon::ThreadPool>,
}

impl WorkerPool {
    /// A pool of `threads` workers (0: one per core), named `weft-shared-<i>`, with the stack
    /// size every worker gets ([`crate::WORKER_STACK_BYTES`]).
    pub fn new(threads: usize) -> Result<WorkerPool> {
        WorkerPool::named(threads, "weft-shared")
    }

    /// A pool for one back end alone, named `weft-worker-<i>`.
    pub(crate) fn private(threads: usize) -> Result<WorkerPool> {
        WorkerPool::named(threads, "weft-worker")
    }

    fn named(threads: usize, name: &'static str) -> Result<WorkerPool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("{name}-{i}"))
            .stack_size(crate::WORKER_STACK_BYTES)
            .build()
            .map_err(|e| Error::Threads(e.to_string()))?;
        Ok(WorkerPool {
            pool: Arc::new(pool),
        })
    }

    /// Its number of workers.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// How many back ends (and other clones) share it now.
    pub fn sharers(&self) -> usize {
        Arc::strong_count(&self.pool)
    }

    /// The rayon pool.
    pub(crate) fn rayon(&self) -> &rayon::ThreadPool {
        &self.pool
    }
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("threads", &self.threads())
            .field("sharers", &self.sharers())
            .finish()
    }
}

impl PartialEq for WorkerPool {
    /// The same pool.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.pool, &other.pool)
    }
}

impl Eq for WorkerPool {}
