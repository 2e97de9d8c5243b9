//! Timing: warm-up iterations, then timed ones, summarized by their median.

use std::time::Instant;

use weft::Numeric;

/// The wall-clock times of the timed iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// The median time of one iteration, in seconds.
    pub median: f64,
    /// The fastest iteration, in seconds.
    pub min: f64,
    /// The slowest iteration, in seconds.
    pub max: f64,
    /// Every timed iteration, in seconds, in order.
    pub samples: Vec<f64>,
    /// Untimed warm-up iterations run first.
    pub warmup: usize,
}

/// The median of `samples` (the mean of the middle two for an even count; 0 for none).
pub fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// Runs `step` `warmup` times untimed, then `iters` times timed, and summarizes the timed
/// runs. The first error stops the runs and is returned.
pub fn time_iterations<E>(
    warmup: usize,
    iters: usize,
    step: impl FnMut() -> Result<(), E>,
) -> Result<Timing, E> {
    time_iterations_then(warmup, iters, step, |_| Ok(()))
}

/// [`time_iterations`], calling `after(timed)` once after each iteration, outside the timed
/// region (`timed` says whether that iteration was timed): a baseline timed there runs in
/// alternation with `step`, so both see the machine in the same state.
pub fn time_iterations_then<E>(
    warmup: usize,
    iters: usize,
    mut step: impl FnMut() -> Result<(), E>,
    mut after: impl FnMut(bool) -> Result<(), E>,
) -> Result<Timing, E> {
    for _ in 0..warmup {
        step()?;
        after(false)?;
    }
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let start = Instant::now();
        step()?;
        samples.push(start.elapsed().as_secs_f64());
        after(true)?;
    }
    Ok(Timing {
        median: median(&samples),
        min: samples.iter().copied().fold(f64::INFINITY, f64::min),
        max: samples.iter().copied().fold(0.0, f64::max),
        samples,
        warmup,
    })
}

/// Runs `step` `warmup` times, flushing the runtime after each, untimed. Stateful examples
/// (the stencil, Jacobi) warm up this way on a copy of their state, so that their timed
/// iterations start from the initial state and `--out` holds the state after exactly `--iters`
/// steps; the copy has the same shapes, so the timed steps reuse the warm-up's plans and
/// kernels.
pub fn warm_up<T>(
    np: &Numeric,
    warmup: usize,
    mut step: impl FnMut() -> weft::Result<T>,
) -> weft::Result<()> {
    for _ in 0..warmup {
        let kept = step()?;
        np.runtime(|rt| rt.synchronize())?;
        drop(kept);
    }
    Ok(())
}

/// What the runtime did during the timed iterations of [`bench()`], per iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerIter {
    /// Tasks plugins submitted per timed iteration.
    pub tasks_submitted: f64,
    /// Tasks the executor ran per timed iteration.
    pub tasks_executed: f64,
    /// Kernels compiled during all the timed iterations (0 in a steady state).
    pub kernels_compiled: u64,
    /// Bytes this rank sent to other ranks per timed iteration (0 on one process).
    pub bytes_sent: f64,
    /// Messages this rank sent per timed iteration.
    pub messages_sent: f64,
}

/// [`time_iterations`] for Weft code: each iteration runs `step`, then synchronizes the
/// runtime ([`weft::Runtime::synchronize`]: the time includes running every task the step
/// submitted, on the device too; on a device with a clock of its own, a GPU, the times are
/// the device's, between marks recorded before the step and after the synchronization) while the step's result is
/// still alive, then drops it. The timed iterations start with [`weft::Runtime::warmed_up`]
/// (so `WEFT_FORBID_COMPILES_AFTER_WARMUP=1` makes a compile in them an error). Returns the timing, the runtime's work per timed iteration,
/// and the last iteration's result.
pub fn bench<T>(
    np: &Numeric,
    warmup: usize,
    iters: usize,
    step: impl FnMut() -> weft::Result<T>,
) -> weft::Result<(Timing, PerIter, Option<T>)> {
    bench_then(np, warmup, iters, step, |_| Ok(()))
}

/// [`bench()`], calling `after(timed)` after each iteration as [`time_iterations_then`] does:
/// a baseline that `after` times runs in alternation with the Weft iterations.
pub fn bench_then<T>(
    np: &Numeric,
    warmup: usize,
    iters: usize,
    mut step: impl FnMut() -> weft::Result<T>,
    after: impl FnMut(bool) -> weft::Result<()>,
) -> weft::Result<(Timing, PerIter, Option<T>)> {
    let mut last = None;
    let mut before = np.runtime(|rt| rt.stats());
    let mut sent_before = np.runtime(|rt| rt.traffic());
    let mut iteration = 0usize;
    // The device's own times of the timed iterations, where it has a clock of its own.
    let mut device = Vec::with_capacity(iters);
    let timing = time_iterations_then(
        warmup,
        iters,
        || {
            if iteration == warmup {
                before = np.runtime(|rt| rt.stats());
                sent_before = np.runtime(|rt| rt.traffic());
                // With WEFT_FORBID_COMPILES_AFTER_WARMUP=1, a compile in the timed loop is an error.
                np.runtime(|rt| rt.warmed_up());
            }
            iteration += 1;
            // The previous iteration's results are dropped before this one runs, as a loop that
            // reassigns its results would: both are never alive at once.
            last = None;
            let from = np.runtime(|rt| rt.record_mark())?;
            let kept = step()?;
            np.runtime(|rt| rt.synchronize())?;
            let to = np.runtime(|rt| rt.record_mark())?;
            if let (Some(from), Some(to)) = (from, to)
                && let Some(d) = np.runtime(|rt| rt.mark_elapsed(from, to))?
                && iteration > warmup
            {
                device.push(d.as_secs_f64());
            }
            last = Some(kept);
            Ok::<(), weft::Error>(())
        },
        after,
    )?;
    np.runtime(|rt| rt.forbid_compiles(false));
    // On a device with a clock of its own (a GPU's events), its times are the timing.
    let timing = if device.len() == iters && iters > 0 {
        Timing {
            median: median(&device),
            min: device.iter().copied().fold(f64::INFINITY, f64::min),
            max: device.iter().copied().fold(0.0, f64::max),
            samples: device,
            warmup: timing.warmup,
        }
    } else {
        timing
    };
    let after = np.runtime(|rt| rt.stats());
    let sent_after = np.runtime(|rt| rt.traffic());
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / iters.max(1) as f64;
    let work = PerIter {
        tasks_submitted: per(after.tasks_submitted, before.tasks_submitted),
        tasks_executed: per(after.exec.tasks_executed, before.exec.tasks_executed),
        kernels_compiled: after
            .exec
            .kernels_compiled
            .saturating_sub(before.exec.kernels_compiled),
        bytes_sent: per(sent_after.bytes, sent_before.bytes),
        messages_sent: per(sent_after.messages, sent_before.messages),
    };
    Ok((timing, work, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn runs_warmup_then_timed() {
        let mut calls = 0;
        let t = time_iterations::<()>(2, 3, || {
            calls += 1;
            Ok(())
        })
        .expect("no error");
        assert_eq!(calls, 5);
        assert_eq!(t.samples.len(), 3);
        assert_eq!(t.warmup, 2);
        assert!(t.min <= t.median && t.median <= t.max);
    }

    #[test]
    fn the_baseline_runs_after_every_iteration_outside_the_timed_region() {
        let mut log = Vec::new();
        let log_ref = std::cell::RefCell::new(&mut log);
        let t = time_iterations_then::<()>(
            1,
            2,
            || {
                log_ref.borrow_mut().push("step");
                Ok(())
            },
            |timed| {
                log_ref.borrow_mut().push(if timed {
                    "after timed"
                } else {
                    "after warm-up"
                });
                Ok(())
            },
        )
        .expect("no error");
        assert_eq!(t.samples.len(), 2);
        assert_eq!(
            log,
            [
                "step",
                "after warm-up",
                "step",
                "after timed",
                "step",
                "after timed"
            ]
        );
    }

    #[test]
    fn stops_at_the_first_error() {
        let mut calls = 0;
        let r = time_iterations(1, 5, || {
            calls += 1;
            if calls == 3 { Err("boom") } else { Ok(()) }
        });
        assert_eq!(r, Err("boom"));
        assert_eq!(calls, 3);
    }
}
