//! The weighted queue of jobs in front of the worker pool.
//!
//! Each tenant has its own queue, bounded by its `max_queued`, and may have at most its
//! `max_running` jobs on workers; the whole service queues at most `queue_limit`. A free
//! worker takes the next job of the eligible tenant (queued jobs, below its running bound)
//! that has the least *pass*: each job a tenant starts adds `1 / weight` to its pass, so
//! over time tenants with queued work start jobs in proportion to their weights (stride
//! scheduling). A tenant that was idle re-enters at the least pass of the active tenants,
//! so idling earns no credit.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::config::TenantConfig;

/// Why a job cannot be queued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// The tenant has `max_queued` jobs waiting.
    Tenant,
    /// The service has `queue_limit` jobs waiting.
    Service,
}

struct TenantQueue {
    jobs: VecDeque<u64>,
    /// Slots promised to submissions not yet queued (their records being written).
    reserved: usize,
    running: usize,
    max_running: usize,
    max_queued: usize,
    weight: f64,
    pass: f64,
}

impl TenantQueue {
    fn active(&self) -> bool {
        !self.jobs.is_empty() || self.running > 0
    }
}

struct Queues {
    tenants: Vec<TenantQueue>,
    /// Jobs queued and reserved, over all tenants.
    waiting: usize,
    limit: usize,
    stopping: bool,
}

/// The queues, shared by the API (which adds and cancels) and the workers (which take).
pub struct Scheduler {
    queues: Mutex<Queues>,
    wake: Condvar,
}

impl Scheduler {
    /// Empty queues for `tenants` (indexed as given), at most `limit` jobs waiting in all.
    pub fn new(tenants: &[TenantConfig], limit: usize) -> Scheduler {
        let tenants = tenants
            .iter()
            .map(|t| TenantQueue {
                jobs: VecDeque::new(),
                reserved: 0,
                running: 0,
                max_running: t.max_running,
                max_queued: t.max_queued,
                weight: f64::from(t.weight),
                pass: 0.0,
            })
            .collect();
        Scheduler {
            queues: Mutex::new(Queues {
                tenants,
                waiting: 0,
                limit,
                stopping: false,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A worker that panicked holding the lock left the queues as they were between
        // two whole operations: go on with them.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves a place in `tenant`'s queue for a job about to be recorded; give it back
    /// with [`Scheduler::push`] or [`Scheduler::release`].
    pub fn reserve(&self, tenant: usize) -> Result<(), Full> {
        let mut q = self.lock();
        if q.waiting >= q.limit {
            return Err(Full::Service);
        }
        let t = &mut q.tenants[tenant];
        if t.jobs.len() + t.reserved >= t.max_queued {
            return Err(Full::Tenant);
        }
        t.reserved += 1;
        q.waiting += 1;
        Ok(())
    }

    /// Gives back a reservation that was not used.
    pub fn release(&self, tenant: usize) {
        let mut q = self.lock();
        q.tenants[tenant].reserved = q.tenants[tenant].reserved.saturating_sub(1);
        q.waiting = q.waiting.saturating_sub(1);
    }

    /// Queues job `id` of `tenant` in its reserved place (or over its bounds, when `reserved`
    /// is false: jobs requeued after a restart).
    pub fn push(&self, tenant: usize, id: u64, reserved: bool) {
        let mut q = self.lock();
        let least = least_active_pass(&q.tenants);
        let t = &mut q.tenants[tenant];
        if !t.active()
            && let Some(least) = least
        {
            t.pass = t.pass.max(least);
        }
        if reserved {
            t.reserved = t.reserved.saturating_sub(1);
        } else {
            q.waiting += 1;
        }
        q.tenants[tenant].jobs.push_back(id);
        drop(q);
        self.wake.notify_one();
    }

    /// Takes job `id` out of `tenant`'s queue; whether it was there.
    pub fn remove(&self, tenant: usize, id: u64) -> bool {
        let mut q = self.lock();
        let t = &mut q.tenants[tenant];
        let Some(at) = t.jobs.iter().position(|&j| j == id) else {
            return false;
        };
        t.jobs.remove(at);
        q.waiting = q.waiting.saturating_sub(1);
        true
    }

    /// The next job to run, as (tenant, id), waiting for one; `None` once stopping.
    pub fn next(&self) -> Option<(usize, u64)> {
        let mut q = self.lock();
        loop {
            if q.stopping {
                return None;
            }
            if let Some(picked) = pick(&mut q) {
                return Some(picked);
            }
            q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The next job to run, if one may start now (without waiting).
    pub fn try_next(&self) -> Option<(usize, u64)> {
        let mut q = self.lock();
        if q.stopping {
            return None;
        }
        pick(&mut q)
    }

    /// A job of `tenant` left its worker.
    pub fn done(&self, tenant: usize) {
        let mut q = self.lock();
        q.tenants[tenant].running = q.tenants[tenant].running.saturating_sub(1);
        drop(q);
        // The tenant may now be eligible again, for any waiting worker.
        self.wake.notify_all();
    }

    /// Workers take no more jobs; those waiting in [`Scheduler::next`] return `None`.
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_all();
    }

    /// Jobs of `tenant` queued, and running.
    pub fn counts(&self, tenant: usize) -> (usize, usize) {
        let q = self.lock();
        (q.tenants[tenant].jobs.len(), q.tenants[tenant].running)
    }
}

/// The least pass of the tenants with jobs queued or running, if any has.
fn least_active_pass(tenants: &[TenantQueue]) -> Option<f64> {
    tenants
        .iter()
        .filter(|t| t.active())
        .map(|t| t.pass)
        .min_by(f64::total_cmp)
}

/// The eligible tenant with the least pass (the first of equals) starts its oldest job.
fn pick(q: &mut Queues) -> Option<(usize, u64)> {
    let tenant = q
        .tenants
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.jobs.is_empty() && t.running < t.max_running)
        .min_by(|(_, a), (_, b)| a.pass.total_cmp(&b.pass))
        .map(|(i, _)| i)?;
    let t = &mut q.tenants[tenant];
    let id = t.jobs.pop_front()?;
    t.running += 1;
    t.pass += 1.0 / t.weight;
    q.waiting = q.waiting.saturating_sub(1);
    Some((tenant, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(weight: u32, max_running: usize, max_queued: usize) -> TenantConfig {
        TenantConfig {
            name: "t".into(),
            token: "0123456789abcdef".into(),
            weight,
            max_running,
            max_queued,
            store_bytes: 1 << 30,
            kernel_time_ms: 1000,
            time_limit_s: 10,
            memory_mb: 64,
            output_bytes: 1 << 20,
            upload_bytes: 1 << 20,
            retain_jobs: 1000,
        }
    }

    #[test]
    fn busy_tenants_start_jobs_in_proportion_to_their_weights() {
        let s = Scheduler::new(&[tenant(3, 1000, 1000), tenant(1, 1000, 1000)], 10_000);
        for id in 0..400 {
            for t in 0..2 {
                s.reserve(t).expect("room");
                s.push(t, id * 2 + t as u64, true);
            }
        }
        let mut started = [0usize; 2];
        for _ in 0..400 {
            let (t, _) = s.next().expect("a job");
            started[t] += 1;
        }
        assert_eq!(started, [300, 100]);
    }

    #[test]
    fn a_tenant_at_its_running_bound_waits_and_others_go_first() {
        let s = Scheduler::new(&[tenant(1000, 1, 10), tenant(1, 1, 10)], 100);
        for (t, id) in [(0, 1), (0, 2)] {
            s.reserve(t).expect("room");
            s.push(t, id, true);
        }
        assert_eq!(s.try_next(), Some((0, 1)));
        // Tenant 0 is at its bound of one running job, whatever its weight.
        assert_eq!(s.try_next(), None);
        s.reserve(1).expect("room");
        s.push(1, 3, true);
        assert_eq!(s.try_next(), Some((1, 3)));
        s.done(0);
        assert_eq!(s.try_next(), Some((0, 2)));
    }

    #[test]
    fn queues_are_bounded_per_tenant_and_in_all() {
        let s = Scheduler::new(&[tenant(1, 1, 2), tenant(1, 1, 10)], 3);
        assert_eq!(s.reserve(0), Ok(()));
        assert_eq!(s.reserve(0), Ok(()));
        assert_eq!(s.reserve(0), Err(Full::Tenant));
        assert_eq!(s.reserve(1), Ok(()));
        assert_eq!(s.reserve(1), Err(Full::Service));
        s.release(1);
        assert_eq!(s.reserve(1), Ok(()));
    }

    #[test]
    fn a_queued_job_can_be_removed_and_is_not_started() {
        let s = Scheduler::new(&[tenant(1, 4, 10)], 100);
        for id in [1, 2] {
            s.reserve(0).expect("room");
            s.push(0, id, true);
        }
        assert!(s.remove(0, 1));
        assert!(!s.remove(0, 1));
        assert_eq!(s.next(), Some((0, 2)));
        s.stop();
        assert_eq!(s.next(), None);
    }

    #[test]
    fn an_idle_tenant_earns_no_credit() {
        let s = Scheduler::new(&[tenant(1, 100, 1000), tenant(1, 100, 1000)], 10_000);
        for id in 0..50 {
            s.reserve(0).expect("room");
            s.push(0, id, true);
        }
        for _ in 0..50 {
            s.next().expect("a job");
        }
        // Tenant 0's 50 jobs still run; tenant 1 arrives and the two now alternate.
        for id in 100..110 {
            for t in 0..2 {
                s.reserve(t).expect("room");
                s.push(t, id * 2 + t as u64, true);
            }
        }
        let mut started = [0usize; 2];
        for _ in 0..10 {
            started[s.next().expect("a job").0] += 1;
        }
        assert_eq!(started, [5, 5]);
    }
}
