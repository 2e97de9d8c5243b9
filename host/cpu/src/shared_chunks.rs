//! The chunks of one launch, run by the launching thread and the pool's workers together.
//!
//! Handing a whole launch to the pool (rayon's `install`) makes the launching thread wait for a
//! worker to wake up before any chunk runs, and then for the pool to finish. On the 2-core
//! machine this was measured on, that hand-off cost more than the kernels of NPBench's
//! time-stepped stencils at the `M` size (`heat_3d`'s sweep of 55,000 points, `jacobi_2d`'s of
//! 121,000): running every chunk on the launching thread alone was faster than two workers.
//! Here the launching thread starts on the chunks at once while helper jobs, queued on the
//! pool, wake up and take chunks too; each chunk is claimed once, the launching thread's from
//! the front and the helpers' from the back (see [`Claims`]). Results do not depend on which thread runs a chunk, so they are the same for
//! any number of threads, as before.
//!
//! The launching thread returns only after every chunk has run and no helper is running one.
//! A helper that starts after that finds the launch closed and touches nothing of it: it
//! reaches the launch's closure only between a successful [`Gate::enter`] and its
//! [`Gate::leave`], and the launching thread closes the gate and waits for the helpers inside
//! before its frame (the closure, the chunk results) goes away.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::ThreadPool;

/// The bit of [`Gate::state`] that closes the gate; the bits below count the helpers inside.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Who may still run chunks of a launch (see the module documentation).
#[derive(Default)]
struct Gate {
    /// [`CLOSED`], and the number of helpers inside.
    state: AtomicUsize,
    /// The first panic of a helper, for the launching thread to resume.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Gate {
    /// Enters unless the gate is closed; returns whether it did.
    fn enter(&self) -> bool {
        let mut s = self.state.load(Ordering::SeqCst);
        loop {
            if s & CLOSED != 0 {
                return false;
            }
            match self
                .state
                .compare_exchange(s, s + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Leaves after a successful [`Gate::enter`].
    fn leave(&self) {
        self.state.fetch_sub(1, Ordering::SeqCst);
    }

    /// Closes the gate and waits until no helper is inside.
    fn close_and_wait(&self) {
        self.state.fetch_or(CLOSED, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.state.load(Ordering::SeqCst) & !CLOSED != 0 {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Closes its gate and waits for the helpers inside when dropped, so that the launching
/// thread's frame outlives every helper's use of it even when a chunk panics there.
struct Closer<'a>(&'a Gate);

impl Drop for Closer<'_> {
    fn drop(&mut self) {
        self.0.close_and_wait();
    }
}

/// The chunks not yet claimed, `front..back`, in one word (`front` in the high half), so that
/// the launching thread claims from the front and helpers from the back. A loop repeated every
/// step then keeps each part of its data on one core from step to step, about as well as a
/// static split, while a thread that finishes first still takes what is left: one shared
/// counter gave every chunk to whichever thread came first, so each step moved the data
/// between the cores' caches (NPBench's `floyd_warshall` at `M`, a 1.3 MB matrix updated 400
/// times: 45-55 ms in the processes where the helper ran beside the launching thread, 9-12
/// ms where it did not, against 10-12 ms in every process with the claims split).
struct Claims(AtomicU64);

impl Claims {
    /// Claims of `chunks` chunks: fewer than 2^32 (a launch has at most 2^24 points).
    fn new(chunks: usize) -> Claims {
        let chunks = u64::try_from(chunks)
            .unwrap_or(u64::MAX)
            .min(u64::from(u32::MAX));
        Claims(AtomicU64::new(chunks))
    }

    /// Claims the first chunk left (or the last, `from_back`), if any is.
    fn claim(&self, from_back: bool) -> Option<usize> {
        let mut s = self.0.load(Ordering::SeqCst);
        loop {
            let (front, back) = (s >> 32, s & u64::from(u32::MAX));
            if front >= back {
                return None;
            }
            let (next, c) = if from_back {
                ((front << 32) | (back - 1), back - 1)
            } else {
                (((front + 1) << 32) | back, front)
            };
            match self
                .0
                .compare_exchange(s, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return usize::try_from(c).ok(),
                Err(now) => s = now,
            }
        }
    }
}

/// A helper's view of the launch's worker loop, its lifetime erased.
struct Loop(*const (dyn Fn() + Sync + 'static));

// SAFETY: the closure behind the pointer is `Sync`, and a helper calls it only inside the
// gate, while the launching thread keeps it alive (see `run`).
unsafe impl Send for Loop {}

/// Runs `run(c, scratch)` for every chunk `c` in `0..chunks` once, on the calling thread (from
/// the first chunk on) and on up to `helpers` jobs of `pool` (from the last chunk back), each
/// thread with its own `scratch`, and returns the results in chunk order. A panic in a chunk is resumed on the calling thread once every
/// helper has left.
pub(crate) fn run<R, S, F>(pool: &ThreadPool, chunks: usize, helpers: usize, run: F) -> Vec<R>
where
    R: Send,
    S: Default,
    F: Fn(usize, &mut S) -> R + Sync,
{
    let claims = Claims::new(chunks);
    let slots: Vec<Mutex<Option<R>>> = (0..chunks).map(|_| Mutex::new(None)).collect();
    let work = |from_back: bool| {
        let mut scratch = S::default();
        while let Some(c) = claims.claim(from_back) {
            let r = run(c, &mut scratch);
            *slots[c].lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
        }
    };
    let gate = Arc::new(Gate::default());
    {
        let closer = Closer(&gate);
        let helper = || work(true);
        let erased: &(dyn Fn() + Sync + '_) = &helper;
        // SAFETY: only the lifetime changes (same layout); the pointer is dereferenced by
        // helpers inside the gate alone, and `closer` closes the gate and waits for them
        // before `helper` (declared above it) is dropped, on return or unwind.
        let erased: &'static (dyn Fn() + Sync) = unsafe {
            std::mem::transmute::<&(dyn Fn() + Sync + '_), &'static (dyn Fn() + Sync)>(erased)
        };
        for _ in 0..helpers.min(chunks.saturating_sub(1)) {
            let (gate, body) = (Arc::clone(&gate), Loop(erased));
            pool.spawn(move || {
                let body = body;
                if gate.enter() {
                    // SAFETY: inside the gate, the launching thread keeps the closure alive.
                    let done = catch_unwind(AssertUnwindSafe(|| unsafe { (*body.0)() }));
                    if let Err(p) = done {
                        let mut first = gate.panic.lock().unwrap_or_else(PoisonError::into_inner);
                        first.get_or_insert(p);
                    }
                    gate.leave();
                }
            });
        }
        work(false);
        drop(closer);
    }
    if let Some(p) = gate
        .panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        resume_unwind(p);
    }
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .expect("every chunk runs once before the launching thread returns")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn pool(threads: usize) -> ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
    }

    #[test]
    fn every_chunk_runs_once_and_results_come_in_chunk_order() {
        for threads in [1, 2, 4] {
            let p = pool(threads);
            for chunks in [1usize, 2, 3, 17, 1000] {
                let ran = Mutex::new(Vec::new());
                let out = run(&p, chunks, threads, |c, scratch: &mut Vec<usize>| {
                    scratch.push(c);
                    ran.lock().unwrap().push(c);
                    c * 3 + 1
                });
                let want: Vec<usize> = (0..chunks).map(|c| c * 3 + 1).collect();
                assert_eq!(out, want, "{threads} threads, {chunks} chunks");
                let ran = ran.into_inner().unwrap();
                assert_eq!(ran.len(), chunks);
                assert_eq!(ran.iter().collect::<HashSet<_>>().len(), chunks);
            }
        }
    }

    #[test]
    fn helpers_that_start_after_the_launch_touch_nothing() {
        // One worker kept busy until the launch is over: its helper job starts afterwards,
        // finds the gate closed and leaves; the launching thread ran every chunk.
        let p = pool(1);
        let (hold, release) = std::sync::mpsc::channel::<()>();
        p.spawn(move || {
            let _ = release.recv();
        });
        let me = std::thread::current().id();
        let out = run(&p, 8, 1, |c, _: &mut ()| (c, std::thread::current().id()));
        assert!(out.iter().all(|&(_, t)| t == me));
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        hold.send(()).unwrap();
    }

    #[test]
    fn a_panicking_chunk_panics_on_the_launching_thread() {
        let p = pool(2);
        let got = catch_unwind(AssertUnwindSafe(|| {
            run(&p, 64, 2, |c, _: &mut ()| {
                assert!(c != 37, "chunk 37");
                c
            })
        }));
        assert!(got.is_err());
        // The pool still runs launches.
        assert_eq!(run(&p, 4, 2, |c, _: &mut ()| c), vec![0, 1, 2, 3]);
    }
}
