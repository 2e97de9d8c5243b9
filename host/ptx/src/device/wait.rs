//! How a host thread waits for the device while it must also watch a time limit: it polls
//! the device, and between polls it yields at first, then sleeps for longer and longer.
//!
//! A fixed sleep between polls costs every wait up to that sleep and the scheduler's slack
//! after the work is done: with 200 us sleeps, each residual read of a CG iteration on an
//! H200 came back about 0.13-0.25 ms after the device finished (0.26 ms an iteration at 16^2
//! unknowns, where the kernels take about 35 us). The work a solver waits for between two
//! reads is usually well under a millisecond, so the first [`SPIN`] only yields the thread
//! (the device is asked again within microseconds); longer waits, which a few microseconds
//! of lateness do not matter to, sleep from [`FIRST_SLEEP`] doubling to [`LONGEST_SLEEP`].

use std::time::Duration;

/// How long a wait polls with no more than a yield between polls.
pub const SPIN: Duration = Duration::from_millis(2);

/// The first sleep after [`SPIN`].
pub const FIRST_SLEEP: Duration = Duration::from_micros(20);

/// The longest sleep between two polls (how late, at most, a long wait notices the end).
pub const LONGEST_SLEEP: Duration = Duration::from_millis(1);

/// What to do before the next poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// Give the processor up for a moment (`std::thread::yield_now`), then poll.
    Yield,
    /// Sleep this long, then poll.
    Sleep(Duration),
}

/// The pauses of one wait, from its start (see the module documentation).
#[derive(Clone, Debug)]
pub struct Backoff {
    sleep: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

impl Backoff {
    /// A wait that has not paused yet.
    pub fn new() -> Backoff {
        Backoff { sleep: FIRST_SLEEP }
    }

    /// The pause after a poll that found the work unfinished, `waited` into the wait.
    pub fn pause(&mut self, waited: Duration) -> Pause {
        if waited < SPIN {
            return Pause::Yield;
        }
        let sleep = self.sleep;
        self.sleep = (self.sleep * 2).min(LONGEST_SLEEP);
        Pause::Sleep(sleep)
    }

    /// Takes the pause after a poll `waited` into the wait, never sleeping past `limit`.
    pub fn wait(&mut self, waited: Duration, limit: Duration) {
        match self.pause(waited) {
            Pause::Yield => std::thread::yield_now(),
            Pause::Sleep(d) => std::thread::sleep(d.min(limit.saturating_sub(waited))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_wait_only_yields() {
        let mut b = Backoff::new();
        for us in [0, 1, 50, 500, 1999] {
            assert_eq!(b.pause(Duration::from_micros(us)), Pause::Yield);
        }
    }

    #[test]
    fn a_long_wait_sleeps_longer_each_time_up_to_the_longest() {
        let mut b = Backoff::new();
        let mut sleeps = Vec::new();
        for i in 0..10u64 {
            match b.pause(SPIN + Duration::from_micros(i)) {
                Pause::Sleep(d) => sleeps.push(d),
                Pause::Yield => panic!("a yield after the spin"),
            }
        }
        assert_eq!(sleeps[0], FIRST_SLEEP);
        for w in sleeps.windows(2) {
            assert!(w[1] == (w[0] * 2).min(LONGEST_SLEEP), "{sleeps:?}");
        }
        assert_eq!(*sleeps.last().unwrap_or(&Duration::ZERO), LONGEST_SLEEP);
    }
}
