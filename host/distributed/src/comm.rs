//! The transport between ranks: one process ([`Solo`]), or MPI (`crate::mpi_comm`, with the
//! `mpi` feature).

use std::collections::BTreeMap;

use crate::Error;

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
        sends: &BTreeMap<usize, Vec<u8>>,
        recvs: &mut BTreeMap<usize, Vec<u8>>,
    ) -> Result<(), Error>;
    /// Every rank's `mine`, in rank order, on every rank.
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, Error>;
    /// Ends the whole job after an error on this rank: every rank stops, not only this one.
    fn abort(&self, code: i32) -> !;
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
        sends: &BTreeMap<usize, Vec<u8>>,
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
}
