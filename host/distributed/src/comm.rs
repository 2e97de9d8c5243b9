//! The transport between ranks: one process ([`Solo`]), or MPI (`crate::mpi_comm`, with the
//! `mpi` feature).
//!
//! A job that shares its process with others (a service's jobs) runs on a communicator of
//! its own ([`Comm::for_job`]), on which a stop is coordinated: a rank whose part of the job
//! stops tells the others ([`Comm::stop`]); their exchanges then fail instead of waiting for
//! it, and their applications hear it at their next check ([`Comm::stopped`]). The ranks
//! meet again at the job's end ([`Comm::finish`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use weft_runtime::CancelToken;

use crate::Error;

/// What stops one job's exchanges on this rank besides the other ranks: its cancel request
/// and its deadline.
#[derive(Clone, Debug)]
pub struct JobStop {
    /// The job's cancel request.
    pub cancel: Arc<CancelToken>,
    /// When the job's time is up, if it has a limit.
    pub deadline: Option<Instant>,
}

impl JobStop {
    /// Why this rank's part of the job must stop now, if it must.
    pub fn why(&self) -> Option<&'static str> {
        if self.cancel.is_cancelled() {
            Some("cancelled")
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some("past its time limit")
        } else {
            None
        }
    }
}

/// Moves bytes between the ranks of one job.
pub trait Comm {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Sends `sends[peer]` to each peer and fills `recvs[peer]` (sized by the caller, who
    /// knows from the plan how much comes) from each peer, all at once.
    fn exchange(
        &self,
        sends: BTreeMap<usize, Vec<u8>>,
        recvs: &mut BTreeMap<usize, Vec<u8>>,
    ) -> Result<(), Error>;
    /// Every rank's `mine`, in rank order, on every rank.
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, Error>;
    /// Ends the whole process group after an error on this rank: every rank stops, not only
    /// this one.
    fn abort(&self, code: i32) -> !;
    /// A communicator of the same ranks for one job, whose exchanges end with
    /// [`Error::Stopped`] once `stop` says so or another rank's part of the job stopped.
    /// Collective: every rank calls it at the same point, before anything of the job that
    /// may fail.
    fn for_job(&self, stop: JobStop) -> Result<std::rc::Rc<dyn Comm>, Error>;
    /// This rank's part of the job stopped, for `why`: from now on its exchanges fail at
    /// once, and the other ranks are told (where they were told already, or told this rank,
    /// nothing more is sent). Returns false where the ranks cannot be told (a communicator
    /// not made by [`Comm::for_job`]): only [`Comm::abort`] stops them then.
    fn stop(&self, why: &str) -> bool;
    /// Why the job stopped on this rank, or on another rank that told it, if it did.
    /// Does not wait.
    fn stopped(&self) -> Option<String>;
    /// The end of the job on this rank, with `outcome` (empty when its part succeeded):
    /// rank 0 gets every rank's, in rank order, waiting for each (and telling the others
    /// when its own job is cancelled meanwhile); the other ranks get an empty list. It
    /// ignores stops: every rank's part of a job ends.
    fn finish(&self, outcome: &str) -> Result<Vec<String>, Error>;
}

/// The one rank of a job without MPI.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Comm for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn exchange(
        &self,
        sends: BTreeMap<usize, Vec<u8>>,
        recvs: &mut BTreeMap<usize, Vec<u8>>,
    ) -> Result<(), Error> {
        match (sends.keys().next(), recvs.keys().next()) {
            (None, None) => Ok(()),
            _ => Err(Error::Transfer(
                "a one-rank job has no peer to exchange with".into(),
            )),
        }
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        Ok(vec![mine.to_vec()])
    }

    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }

    fn for_job(&self, _stop: JobStop) -> Result<std::rc::Rc<dyn Comm>, Error> {
        Ok(std::rc::Rc::new(Solo))
    }

    /// No other rank waits for this one.
    fn stop(&self, _why: &str) -> bool {
        true
    }

    fn stopped(&self) -> Option<String> {
        None
    }

    fn finish(&self, outcome: &str) -> Result<Vec<String>, Error> {
        Ok(vec![outcome.to_string()])
    }
}
