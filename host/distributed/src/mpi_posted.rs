//! Non-blocking MPI sends and receives whose buffers they own, so that a wait for them can
//! be given up.
//!
//! rsmpi ties a request to a scope that panics when the request is dropped unfinished, and
//! to a buffer that must outlive it. A job's exchange may have to stop while its peers'
//! messages are still due (another rank's part of the job stopped), so each request here
//! owns its buffer, taken out of its `Vec`: once the request completes the buffer goes back
//! into a `Vec` ([`Posted::into_buffer`]); a request given up is cancelled, and where the
//! cancel does not complete it (a send already under way), the request and its buffer are
//! leaked rather than freed under MPI's feet.

use mpi::request::{Request, StaticScope};
use mpi::topology::Process;
use mpi::traits::{Destination, Source};

/// One posted send or receive, over a buffer of its own.
pub(crate) struct Posted {
    request: Option<Request<'static, [u8]>>,
    /// The buffer, from `Box::into_raw`; `None` once given back or leaked.
    buffer: Option<*mut [u8]>,
}

impl Posted {
    /// Sends `data` to `to` with `tag`.
    pub(crate) fn send(to: &Process<'_>, data: Vec<u8>, tag: mpi::Tag) -> Posted {
        let buffer = Box::into_raw(data.into_boxed_slice());
        // SAFETY: `buffer` comes from `Box::into_raw` just above and is freed only by
        // `into_buffer` or `drop`, after the request that reads it completed; until then
        // nothing else touches it.
        let data: &'static [u8] = unsafe { &*buffer };
        let request = to.immediate_send_with_tag(StaticScope, data, tag);
        Posted {
            request: Some(request),
            buffer: Some(buffer),
        }
    }

    /// Receives into `into` (sized for what comes) from `from` with `tag`.
    pub(crate) fn receive(from: &Process<'_>, into: Vec<u8>, tag: mpi::Tag) -> Posted {
        let buffer = Box::into_raw(into.into_boxed_slice());
        // SAFETY: as in `send`: the request is the buffer's only user until it completes.
        let into: &'static mut [u8] = unsafe { &mut *buffer };
        let request = from.immediate_receive_into_with_tag(StaticScope, into, tag);
        Posted {
            request: Some(request),
            buffer: Some(buffer),
        }
    }

    /// Whether it completed (testing it, without waiting).
    pub(crate) fn test(&mut self) -> bool {
        match self.request.take() {
            None => true,
            Some(r) => match r.test() {
                Ok(_) => true,
                Err(r) => {
                    self.request = Some(r);
                    false
                }
            },
        }
    }

    /// The buffer, once the request completed (`None` before).
    pub(crate) fn into_buffer(mut self) -> Option<Vec<u8>> {
        if !self.test() {
            return None;
        }
        let raw = self.buffer.take()?;
        // SAFETY: the request completed, so MPI no longer reads or writes the buffer, and
        // the reference it was given went with it; `raw` came from `Box::into_raw`.
        Some(unsafe { Box::from_raw(raw) }.into_vec())
    }
}

impl Drop for Posted {
    /// Gives the request up: cancelled, and where that does not complete it, leaked with
    /// its buffer.
    fn drop(&mut self) {
        if let Some(r) = self.request.take() {
            r.cancel();
            if let Err(r) = r.test() {
                std::mem::forget(r);
                self.buffer = None;
                return;
            }
        }
        if let Some(raw) = self.buffer.take() {
            // SAFETY: as in `into_buffer`: the request completed (or was cancelled and
            // completed), and `raw` came from `Box::into_raw`.
            drop(unsafe { Box::from_raw(raw) });
        }
    }
}
