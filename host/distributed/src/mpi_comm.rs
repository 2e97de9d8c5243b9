//! [`Comm`] over MPI (rsmpi): point-to-point exchanges posted all at once, all-gathers,
//! and `MPI_Abort` for a rank that fails.

use std::collections::BTreeMap;

use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};

use crate::Error;
use crate::comm::Comm;

/// The ranks of `MPI_COMM_WORLD`. Holds the MPI environment: MPI ends when it drops.
pub struct MpiComm {
    // Dropped last: finalizes MPI.
    world: SimpleCommunicator,
    _universe: mpi::environment::Universe,
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
        let world = universe.world();
        Some(MpiComm {
            world,
            _universe: universe,
        })
    }
}

fn peer(rank: usize) -> Result<mpi::Rank, Error> {
    mpi::Rank::try_from(rank).map_err(|_| Error::Transfer(format!("rank {rank} out of range")))
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        usize::try_from(self.world.rank()).unwrap_or(0)
    }

    fn size(&self) -> usize {
        usize::try_from(self.world.size()).unwrap_or(1)
    }

    fn exchange(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
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
        let targets: Vec<(mpi::Rank, &[u8])> = sends
            .iter()
            .map(|(&to, data)| Ok((peer(to)?, data.as_slice())))
            .collect::<Result<_, Error>>()?;
        let sources: Vec<mpi::Rank> = recvs
            .keys()
            .map(|&from| peer(from))
            .collect::<Result<_, _>>()?;
        let world = &self.world;
        mpi::request::multiple_scope(targets.len() + sources.len(), |scope, coll| {
            for (buf, &from) in recvs.values_mut().zip(&sources) {
                coll.add(
                    world
                        .process_at_rank(from)
                        .immediate_receive_into(scope, &mut buf[..]),
                );
            }
            for &(to, data) in &targets {
                coll.add(world.process_at_rank(to).immediate_send(scope, data));
            }
            let mut statuses = Vec::new();
            coll.wait_all(&mut statuses);
        });
        Ok(())
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        let size = self.size();
        let len = i32::try_from(mine.len())
            .map_err(|_| Error::Transfer(format!("{} bytes to gather", mine.len())))?;
        let mut lens = vec![0i32; size];
        self.world.all_gather_into(&len, &mut lens[..]);
        let mut out = Vec::with_capacity(size);
        for (r, &n) in lens.iter().enumerate() {
            // Nothing to send: no broadcast (an empty buffer's pointer is not one MPI takes).
            if n == 0 {
                out.push(Vec::new());
                continue;
            }
            let mut buf = if r == self.rank() {
                mine.to_vec()
            } else {
                vec![0u8; usize::try_from(n).unwrap_or(0)]
            };
            self.world
                .process_at_rank(peer(r)?)
                .broadcast_into(&mut buf[..]);
            out.push(buf);
        }
        Ok(out)
    }

    fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}
