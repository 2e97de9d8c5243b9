//! [`Comm`] over MPI (rsmpi): point-to-point exchanges posted all at once and waited on in a
//! loop that, on a job's communicator, also watches for the job's stop; all-gathers built on
//! them; stop notices and outcomes between a job's ranks; `MPI_Abort` for a rank that fails
//! outside a job.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::{Process, SimpleCommunicator};
use mpi::traits::{Communicator, Source};

use crate::Error;
use crate::comm::{Comm, JobStop};
use crate::mpi_posted::Posted;

/// The tag of the exchanges' data.
const DATA: mpi::Tag = 1;
/// The tag of a stop notice.
const NOTICE: mpi::Tag = 2;
/// The tag of a rank's outcome, at a job's end.
const OUTCOME: mpi::Tag = 3;
/// The most bytes of a notice's text that are sent (the rest is cut): below the eager limit
/// of Open MPI's shared-memory and TCP transports (4 KiB and 64 KiB with their headers,
/// `ompi_info`), so the send completes at once and a rank that ends its part right after
/// does not give an unmatched notice up.
const NOTICE_BYTES: usize = 1024;
/// The most bytes of an outcome's text that are sent (rank 0 always takes them).
const OUTCOME_BYTES: usize = 4096;
/// How long a wait polls without pause (driving MPI's progress, as a blocking wait would)
/// before it polls once a [`POLL_PAUSE`]: an idle rank waiting for the next job then
/// costs next to nothing.
const SPIN: Duration = Duration::from_millis(100);
/// See [`SPIN`].
const POLL_PAUSE: Duration = Duration::from_millis(1);

/// Pauses between polls of one wait.
struct Backoff(Instant);

impl Backoff {
    fn new() -> Backoff {
        Backoff(Instant::now())
    }

    fn pause(&self) {
        if self.0.elapsed() < SPIN {
            std::thread::yield_now();
        } else {
            std::thread::sleep(POLL_PAUSE);
        }
    }
}

/// A communicator: `MPI_COMM_WORLD` ([`MpiComm::init`]), or one job's duplicate of it
/// ([`Comm::for_job`]). The MPI environment ends when the last of them drops.
pub struct MpiComm {
    comm: SimpleCommunicator,
    /// The job's stop, on a job's communicator.
    job: Option<JobState>,
    // Dropped after `comm`: the last holder finalizes MPI.
    universe: Rc<mpi::environment::Universe>,
}

/// What a job's communicator knows of the job's stop.
struct JobState {
    stop: JobStop,
    /// Why the job stopped, on this rank or as another rank told.
    stopped: RefCell<Option<String>>,
    /// The notices this rank sent; finished (or leaked) at the job's end.
    notices: RefCell<Vec<Posted>>,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiComm(rank {} of {})", self.rank(), self.size())
    }
}

impl MpiComm {
    /// Initializes MPI (a binary started without `mpirun` is one rank); `None` if MPI was
    /// initialized already in this process.
    pub fn init() -> Option<MpiComm> {
        let universe = mpi::initialize()?;
        let comm = universe.world();
        Some(MpiComm {
            comm,
            job: None,
            universe: Rc::new(universe),
        })
    }

    fn process(&self, rank: usize) -> Result<Process<'_>, Error> {
        let r = mpi::Rank::try_from(rank)
            .ok()
            .filter(|&r| r < self.comm.size())
            .ok_or_else(|| Error::Transfer(format!("rank {rank} out of range")))?;
        Ok(self.comm.process_at_rank(r))
    }

    /// Why this rank's exchanges must stop, if they must: the job stopped (here or on a rank
    /// that told), or its stop says so now (then the other ranks are told).
    fn must_stop(&self) -> Option<String> {
        let job = self.job.as_ref()?;
        if let Some(why) = self.stopped() {
            return Some(why);
        }
        let why = job.stop.why()?;
        self.stop(why);
        Some(why.to_string())
    }

    /// Waits until every request in `posted` completed, or the job must stop.
    fn wait(&self, posted: &mut [Posted]) -> Result<(), Error> {
        let backoff = Backoff::new();
        loop {
            let mut done = true;
            for p in posted.iter_mut() {
                done &= p.test();
            }
            if done {
                return Ok(());
            }
            if let Some(why) = self.must_stop() {
                return Err(Error::Stopped(why));
            }
            backoff.pause();
        }
    }

    /// Finishes this rank's notices, leaking those still under way.
    fn drop_notices(&self) {
        if let Some(job) = &self.job {
            for mut n in job.notices.borrow_mut().drain(..) {
                n.test();
            }
        }
    }
}

/// `text`, cut to at most `most` bytes at a character boundary.
fn cut(text: &str, most: usize) -> Vec<u8> {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.as_bytes()[..end].to_vec()
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        usize::try_from(self.comm.rank()).unwrap_or(0)
    }

    fn size(&self) -> usize {
        usize::try_from(self.comm.size()).unwrap_or(1)
    }

    fn exchange(
        &self,
        sends: BTreeMap<usize, Vec<u8>>,
        recvs: &mut BTreeMap<usize, Vec<u8>>,
    ) -> Result<(), Error> {
        let size = self.size();
        if let Some(&bad) = sends
            .keys()
            .chain(recvs.keys())
            .find(|&&p| p >= size || p == self.rank())
        {
            return Err(Error::Transfer(format!(
                "rank {} cannot exchange with rank {bad} of {size}",
                self.rank()
            )));
        }
        if let Some(why) = self.must_stop() {
            return Err(Error::Stopped(why));
        }
        let mut from = Vec::with_capacity(recvs.len());
        let mut posted = Vec::with_capacity(recvs.len() + sends.len());
        for (&peer, buf) in recvs.iter_mut() {
            from.push(peer);
            posted.push(Posted::receive(
                &self.process(peer)?,
                std::mem::take(buf),
                DATA,
            ));
        }
        for (peer, data) in sends {
            posted.push(Posted::send(&self.process(peer)?, data, DATA));
        }
        self.wait(&mut posted)?;
        for (peer, p) in from.into_iter().zip(posted) {
            let buf = p
                .into_buffer()
                .ok_or_else(|| Error::Transfer(format!("a receive from rank {peer} ended")))?;
            recvs.insert(peer, buf);
        }
        Ok(())
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        let me = self.rank();
        let peers: Vec<usize> = (0..self.size()).filter(|&r| r != me).collect();
        let len = (mine.len() as u64).to_le_bytes();
        let mut lens: BTreeMap<usize, Vec<u8>> = peers.iter().map(|&p| (p, vec![0; 8])).collect();
        self.exchange(
            peers.iter().map(|&p| (p, len.to_vec())).collect(),
            &mut lens,
        )?;
        let mut recvs = BTreeMap::new();
        for (peer, b) in lens {
            let n = <[u8; 8]>::try_from(b.as_slice())
                .ok()
                .and_then(|b| usize::try_from(u64::from_le_bytes(b)).ok())
                .ok_or_else(|| Error::Transfer(format!("a length from rank {peer}")))?;
            // Nothing to send: no message.
            if n > 0 {
                recvs.insert(peer, vec![0u8; n]);
            }
        }
        let sends = if mine.is_empty() {
            BTreeMap::new()
        } else {
            peers.iter().map(|&p| (p, mine.to_vec())).collect()
        };
        self.exchange(sends, &mut recvs)?;
        Ok((0..self.size())
            .map(|r| {
                if r == me {
                    mine.to_vec()
                } else {
                    recvs.remove(&r).unwrap_or_default()
                }
            })
            .collect())
    }

    fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }

    fn for_job(&self, stop: JobStop) -> Result<Rc<dyn Comm>, Error> {
        Ok(Rc::new(MpiComm {
            comm: self.comm.duplicate(),
            job: Some(JobState {
                stop,
                stopped: RefCell::new(None),
                notices: RefCell::new(Vec::new()),
            }),
            universe: self.universe.clone(),
        }))
    }

    fn stop(&self, why: &str) -> bool {
        let Some(job) = &self.job else {
            return false;
        };
        // (The borrow ends before `stopped`, which may record a notice it receives.)
        let recorded = job.stopped.borrow().is_some();
        if recorded || self.stopped().is_some() {
            return true;
        }
        *job.stopped.borrow_mut() = Some(why.to_string());
        let notice = cut(
            &format!("rank {} stopped: {why}", self.rank()),
            NOTICE_BYTES,
        );
        for peer in (0..self.size()).filter(|&r| r != self.rank()) {
            if let Ok(to) = self.process(peer) {
                let sent = Posted::send(&to, notice.clone(), NOTICE);
                job.notices.borrow_mut().push(sent);
            }
        }
        true
    }

    fn stopped(&self) -> Option<String> {
        let job = self.job.as_ref()?;
        if let Some(why) = job.stopped.borrow().clone() {
            return Some(why);
        }
        let (bytes, _) = self
            .comm
            .any_process()
            .immediate_matched_probe_with_tag(NOTICE)?
            .matched_receive_vec::<u8>();
        let why = String::from_utf8_lossy(&bytes).into_owned();
        *job.stopped.borrow_mut() = Some(why.clone());
        Some(why)
    }

    fn finish(&self, outcome: &str) -> Result<Vec<String>, Error> {
        let me = self.rank();
        if me != 0 {
            let mut sent = Posted::send(&self.process(0)?, cut(outcome, OUTCOME_BYTES), OUTCOME);
            // Rank 0 takes every rank's outcome.
            let backoff = Backoff::new();
            while !sent.test() {
                backoff.pause();
            }
            self.drop_notices();
            return Ok(Vec::new());
        }
        let mut got: Vec<Option<String>> = vec![None; self.size()];
        got[0] = Some(outcome.to_string());
        let backoff = Backoff::new();
        while got.iter().any(Option::is_none) {
            for (r, slot) in got.iter_mut().enumerate().skip(1) {
                if slot.is_none()
                    && let Some(m) = self.process(r)?.immediate_matched_probe_with_tag(OUTCOME)
                {
                    let (bytes, _) = m.matched_receive_vec::<u8>();
                    *slot = Some(String::from_utf8_lossy(&bytes).into_owned());
                }
            }
            // Cancelled (or out of time) while the others still run: they are told.
            if let Some(why) = self.job.as_ref().and_then(|j| j.stop.why()) {
                self.stop(why);
            }
            backoff.pause();
        }
        self.drop_notices();
        Ok(got.into_iter().map(Option::unwrap_or_default).collect())
    }
}
