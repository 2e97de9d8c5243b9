//! Time-stepped loops run as replayed traces ([`Numeric::repeat`]).

use super::Numeric;
use crate::Result;

/// The steps recorded, at most, before a loop whose consecutive recordings differ runs its
/// steps as they are.
const RECORDINGS: usize = 4;

/// What [`Numeric::repeat`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepeatStats {
    /// Steps run by calling the step.
    pub steps_run: usize,
    /// Steps made by replaying the trace of an earlier step, without calling the step.
    pub steps_replayed: usize,
}

impl Numeric {
    /// Runs `step` `steps` times, as `for _ in 0..steps { step()? }` would, but makes the
    /// later steps by replaying a recording of an earlier one (as Legion's tracing does), at
    /// the cost of its launches alone: no plugin calls, no submitting, no dependence
    /// analysis, no planning (see `weft_runtime::trace`).
    ///
    /// `step` must make the same calls every time, on the same arrays and with the same
    /// scalars, and keep no new array past its end: a time step that updates arrays in
    /// place (`a.index(..).assign(..)`). The first step runs as it is (it compiles); the
    /// next are recorded, and once two consecutive recordings are the same, the rest are
    /// replays of it. A step that reads an array on the host, folds a reduction on the host,
    /// keeps an array it made, or runs on several ranks, is never replayed: every step then
    /// runs as it is, with the same results. So is a step whose recordings keep differing
    /// (after four). Each step runs what it submitted before the next begins, so windows do
    /// not span steps.
    ///
    /// The Rust code of a replayed step does not run: a step that changes what it does
    /// (a counter, a branch on the step number) past the recorded steps is not seen to.
    pub fn repeat(
        &self,
        steps: usize,
        mut step: impl FnMut() -> Result<()>,
    ) -> Result<RepeatStats> {
        let mut stats = RepeatStats::default();
        let mut previous = None;
        let mut stable = None;
        let mut recordings = 0;
        while stats.steps_run + stats.steps_replayed < steps {
            if let Some(trace) = &stable {
                if self.runtime(|rt| rt.replay_trace(trace))? {
                    stats.steps_replayed += 1;
                    continue;
                }
                // A kernel of the trace was evicted: run the step, and record again.
                stable = None;
                previous = None;
                recordings = 0;
            }
            if stats.steps_run == 0 || recordings >= RECORDINGS {
                step()?;
                self.runtime(|rt| rt.flush())?;
                stats.steps_run += 1;
                continue;
            }
            self.runtime(|rt| rt.begin_trace())?;
            let ran = step();
            let trace = self.runtime(|rt| rt.end_trace());
            ran?;
            let trace = trace?;
            stats.steps_run += 1;
            recordings += 1;
            match (previous.take(), trace) {
                (Some(p), Some(t)) if p == t => stable = Some(t),
                (_, Some(t)) => previous = Some(t),
                (_, None) => recordings = RECORDINGS,
            }
        }
        Ok(stats)
    }
}
