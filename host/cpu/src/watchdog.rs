//! The kernel time limit: a thread that sets the compiled code's cancel flag when one launch
//! runs longer than the limit.
//!
//! A launch arms the watchdog when it starts and disarms it when it ends, each a lock of an
//! uncontended mutex. The watchdog looks every few milliseconds; it sets the flag only under
//! that lock while the launch it timed is still the one running, so a launch never sees the
//! flag set for another.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the watchdog and the launches share.
struct Shared {
    /// When the running launch started (`None`: none runs), and whether the watchdog should
    /// stop.
    state: Mutex<State>,
    wake: Condvar,
    cancel: Arc<AtomicU32>,
    limit: Duration,
}

#[derive(Default)]
struct State {
    started: Option<Instant>,
    stop: bool,
}

/// The watchdog of one back end.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts a watchdog that sets `cancel` when a launch runs past `limit`.
    pub(crate) fn start(cancel: Arc<AtomicU32>, limit: Duration) -> std::io::Result<Watchdog> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            cancel,
            limit,
        });
        let watched = shared.clone();
        let thread = std::thread::Builder::new()
            .name("weft-watchdog".into())
            .spawn(move || watch(&watched))?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }

    /// The limit.
    pub(crate) fn limit(&self) -> Duration {
        self.shared.limit
    }

    /// A launch starts: the flag is cleared and the clock runs.
    pub(crate) fn arm(&self) {
        if let Ok(mut s) = self.shared.state.lock() {
            self.shared.cancel.store(0, Ordering::Relaxed);
            s.started = Some(Instant::now());
        }
    }

    /// The launch ended; returns whether the watchdog cancelled it.
    pub(crate) fn disarm(&self) -> bool {
        match self.shared.state.lock() {
            Ok(mut s) => {
                s.started = None;
                self.shared.cancel.swap(0, Ordering::Relaxed) != 0
            }
            Err(_) => false,
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.state.lock() {
            s.stop = true;
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The watchdog's loop: every tick (an eighth of the limit, between 1 and 50 ms), cancel the
/// running launch if it is past the limit.
fn watch(shared: &Shared) {
    let tick = (shared.limit / 8).clamp(Duration::from_millis(1), Duration::from_millis(50));
    let Ok(mut s) = shared.state.lock() else {
        return;
    };
    while !s.stop {
        if s.started.is_some_and(|t| t.elapsed() >= shared.limit) {
            shared.cancel.store(1, Ordering::Relaxed);
        }
        s = match shared.wake.wait_timeout(s, tick) {
            Ok((s, _)) => s,
            Err(_) => return,
        };
    }
}
