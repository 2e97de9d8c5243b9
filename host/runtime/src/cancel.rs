//! A job's cancel request, which reaches the kernels it has running.
//!
//! A [`CancelToken`] is shared between whoever may cancel a job (a service's `DELETE`, say, on
//! another thread) and the runtime that runs it ([`crate::Core::set_cancel`]). The back end
//! attaches the flag its compiled code checks ([`CancelToken::attach`]); [`CancelToken::cancel`]
//! sets the request and every attached flag, so a kernel already running stops at its next
//! check (the CPU back end's loops check on every back edge), and the back end refuses every
//! launch after it.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct CancelToken {
    requested: AtomicBool,
    /// The flags of the back ends running the job's kernels.
    kernels: Mutex<Vec<Arc<AtomicU32>>>,
}

impl CancelToken {
    /// A token not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels the job: the request is set, then every attached kernel flag.
    pub fn cancel(&self) {
        self.requested.store(true, Ordering::SeqCst);
        let kernels = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        for flag in kernels.iter() {
            flag.store(1, Ordering::SeqCst);
        }
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Attaches the flag a back end's compiled code checks: [`CancelToken::cancel`] sets it
    /// (at once, if the job is cancelled already).
    ///
    /// A back end that clears its flag before each launch must read
    /// [`CancelToken::is_cancelled`] after clearing it, and refuse the launch if it is set:
    /// a cancel sets the request before the flag, so it is seen by one or the other.
    pub fn attach(&self, flag: Arc<AtomicU32>) {
        let mut kernels = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if !kernels.iter().any(|f| Arc::ptr_eq(f, &flag)) {
            if self.is_cancelled() {
                flag.store(1, Ordering::SeqCst);
            }
            kernels.push(flag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_sets_every_attached_flag_and_later_ones_at_once() {
        let token = CancelToken::new();
        let (a, b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        token.attach(a.clone());
        token.attach(a.clone());
        assert!(!token.is_cancelled());
        assert_eq!(a.load(Ordering::SeqCst), 0);
        token.cancel();
        assert!(token.is_cancelled());
        assert_eq!(a.load(Ordering::SeqCst), 1);
        token.attach(b.clone());
        assert_eq!(b.load(Ordering::SeqCst), 1);
    }
}
