//! Fused against unfused, side by side in one process: the same program runs in a runtime
//! with fusion and in one without, on the same inputs, and the report carries both timings,
//! their ratio and whether the results are equal.

use weft::{Numeric, Runtime};

use crate::AppError;
use crate::cli::Args;
use crate::report::Report;
use crate::timing::{PerIter, Timing};

/// One run of a program in one fusion mode.
pub struct ModeRun<S> {
    /// Whether tasks were fused.
    pub fusion: bool,
    /// The runtime it ran in (kept for its counters).
    pub np: Numeric,
    /// The timed iterations.
    pub timing: Timing,
    /// The runtime's work per timed iteration.
    pub per_iter: PerIter,
    /// What the program left, for the comparison of results.
    pub state: S,
}

/// Runs `program` in a fresh runtime with fusion as `args` say (on unless `--no-fusion` or
/// `WEFT_FUSION=0`), then, if that was fused, again in a fresh runtime without fusion. The
/// first run comes first in the result; its runtime is the one the report describes.
pub fn fused_and_unfused<S>(
    args: &Args,
    mut program: impl FnMut(&Numeric) -> Result<(Timing, PerIter, S), AppError>,
) -> Result<Vec<ModeRun<S>>, AppError> {
    let first = args.config();
    let modes = if first.fusion {
        vec![true, false]
    } else {
        vec![false]
    };
    let mut runs = Vec::with_capacity(modes.len());
    for fusion in modes {
        let config = weft::Config {
            fusion,
            ..first.clone()
        };
        let np = Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
        let (timing, per_iter, state) = program(&np)?;
        runs.push(ModeRun {
            fusion,
            np,
            timing,
            per_iter,
            state,
        });
    }
    Ok(runs)
}

/// Records the first run's timing and counters, and, where an unfused run followed a fused
/// one, its time per iteration (`unfused_seconds_per_iter`), tasks per iteration
/// (`unfused_tasks_executed_per_iter`), `speedup_fused_vs_unfused` (unfused time over fused
/// time) and `max_diff_fused_vs_unfused` (the largest difference of the results, as `diff`
/// measures it). Returns that speedup, if there is one.
pub fn report<S>(
    report: &mut Report,
    runs: &[ModeRun<S>],
    diff: impl Fn(&S, &S) -> f64,
) -> Option<f64> {
    let first = runs.first()?;
    report
        .timing(&first.timing, &first.per_iter)
        .runtime_stats(&first.np);
    let unfused = runs.get(1)?;
    let speedup = unfused.timing.median / first.timing.median;
    report
        .set("unfused_seconds_per_iter", unfused.timing.median)
        .set(
            "unfused_tasks_executed_per_iter",
            unfused.per_iter.tasks_executed,
        )
        .set("speedup_fused_vs_unfused", speedup)
        .set(
            "max_diff_fused_vs_unfused",
            diff(&first.state, &unfused.state),
        );
    Some(speedup)
}

/// The largest absolute difference between two lists of arrays' values (infinite where the
/// lengths differ, NaN-aware: a NaN on one side only counts as infinite).
pub fn max_abs_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        if x.len() != y.len() {
            return f64::INFINITY;
        }
        for (p, q) in x.iter().zip(y) {
            let d = match (p.is_nan(), q.is_nan()) {
                (true, true) => 0.0,
                (false, false) => (p - q).abs(),
                _ => f64::INFINITY,
            };
            worst = worst.max(d);
        }
    }
    worst
}
