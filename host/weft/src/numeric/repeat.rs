//! Time-stepped loops run as replayed traces ([`Numeric::repeat`]).

use super::Numeric;
use crate::Result;

/// The steps recorded, at most, before a loop whose consecutive recordings differ runs its
/// steps as they are for a while.
const RECORDINGS: usize = 4;

/// The steps run as they are after the first failed round of recordings before the loop
/// records again; each further failed round doubles it, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: usize = 16;

/// The most steps run as they are between two rounds of recordings.
const MAX_BACKOFF: usize = 4096;

/// What [`Numeric::repeat`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepeatStats {
    /// Steps run by calling the step.
    pub steps_run: usize,
    /// Steps made by replaying the trace of an earlier step, without calling the step.
    pub steps_replayed: usize,
}

impl Numeric {
    /// Runs `step(k)` for `k` in `0..steps`, as `for k in 0..steps { step(k)? }` would, but
    /// makes the later steps by replaying a recording of an earlier one (as Legion's tracing
    /// does), at the cost of its launches alone: no plugin calls, no submitting, no
    /// dependence analysis, no planning (see `weft_runtime::trace`).
    ///
    /// Every step must make the same calls, on the same arrays and with the same scalars,
    /// and keep no new array past its end: a time step that updates arrays in place
    /// (`a.index(..).assign(..)`). Its views may move with `k` by the same amount each step
    /// (`a.index(&[Ix::At(k)])`), and grow where the launch is not split into pieces whose
    /// sizes would then change by different amounts. The first step runs as it is (it
    /// compiles); the next are recorded, and once two consecutive recordings make the same
    /// calls (three, where a view moves, by the same amount both times), the rest are
    /// replays of the last, each moving view moved on (a reduction the runtime folds on the
    /// host, such as a dot product's, is folded again in each replay). A step that reads an
    /// array on the host, keeps an array it made, or runs on several ranks, is never
    /// replayed: every step then runs as it is, with the same results. After four recordings
    /// that do not settle (or one that cannot be replayed), the loop runs its steps as they
    /// are, then records again after 16 steps, then 32, and so on up to 4,096: a loop whose
    /// first steps differ from the rest (a pool or a cache still filling) replays once they
    /// settle. Each step runs what it submitted before the next begins, so windows do not
    /// span steps. Replayed launches are not in `WEFT_PROFILE`'s table.
    ///
    /// The Rust code of a replayed step does not run: a step that changes what it does past
    /// the recorded steps (a branch on `k`, a view that stops moving) is not seen to.
    pub fn repeat(
        &self,
        steps: usize,
        step: impl FnMut(usize) -> Result<()>,
    ) -> Result<RepeatStats> {
        self.repeat_while(steps, step, |_| Ok(true))
    }

    /// [`Numeric::repeat`] for a loop that decides after each step whether to go on, as
    /// NumPy's `while udiff > .001:` does: `go_on(k)` runs after step `k` (recorded, replayed
    /// or run as it is), outside the step, and the loop stops once it says `false` or after
    /// `max_steps` steps. The step leaves what the test reads in arrays made before the loop
    /// (`udiff.assign(..)`), and `go_on` reads it on the host (`udiff.item()`): the step itself
    /// reads nothing there, so it can be replayed. Reading waits for the step's launches.
    pub fn repeat_while(
        &self,
        max_steps: usize,
        mut step: impl FnMut(usize) -> Result<()>,
        mut go_on: impl FnMut(usize) -> Result<bool>,
    ) -> Result<RepeatStats> {
        let steps = max_steps;
        let mut stats = RepeatStats::default();
        // The last recordings, oldest first (two at most), and the trace being replayed with
        // the steps made since the one it recorded.
        let mut recorded: Vec<weft_runtime::Trace> = Vec::new();
        let mut stable: Option<(weft_runtime::Trace, u64)> = None;
        let mut recordings = 0;
        // Where recording starts again after a failed round, and the wait after the next.
        let (mut retry_at, mut backoff) = (0, FIRST_BACKOFF);
        while stats.steps_run + stats.steps_replayed < steps {
            let k = stats.steps_run + stats.steps_replayed;
            'step: {
                if let Some((trace, after)) = &mut stable {
                    *after += 1;
                    let after = *after;
                    if self.runtime(|rt| rt.replay_trace(trace, after))? {
                        stats.steps_replayed += 1;
                        break 'step;
                    }
                    // A kernel of the trace was evicted: run the step, and record again.
                    stable = None;
                    recorded.clear();
                    recordings = 0;
                }
                if recordings >= RECORDINGS && k >= retry_at {
                    // A new round of recordings.
                    recordings = 0;
                    recorded.clear();
                }
                if stats.steps_run == 0 || recordings >= RECORDINGS {
                    step(k)?;
                    self.runtime(|rt| rt.flush())?;
                    stats.steps_run += 1;
                    break 'step;
                }
                self.runtime(|rt| rt.begin_trace())?;
                let ran = step(k);
                let trace = self.runtime(|rt| rt.end_trace());
                ran?;
                stats.steps_run += 1;
                recordings += 1;
                let give_up =
                    |recordings: &mut usize, retry_at: &mut usize, backoff: &mut usize| {
                        *recordings = RECORDINGS;
                        *retry_at = k + 1 + *backoff;
                        *backoff = (*backoff * 2).min(MAX_BACKOFF);
                    };
                let Some(trace) = trace? else {
                    give_up(&mut recordings, &mut retry_at, &mut backoff);
                    break 'step;
                };
                if let Some(last) = recorded.last() {
                    let earlier = recorded.len().checked_sub(2).map(|i| &recorded[i]);
                    if let Some(replayable) = last.follows(earlier, &trace) {
                        stable = Some((replayable, 0));
                        recorded.clear();
                        break 'step;
                    }
                }
                recorded.push(trace);
                if recorded.len() > 2 {
                    recorded.remove(0);
                }
                if recordings >= RECORDINGS {
                    give_up(&mut recordings, &mut retry_at, &mut backoff);
                }
            }
            if !go_on(k)? {
                break;
            }
        }
        Ok(stats)
    }
}
