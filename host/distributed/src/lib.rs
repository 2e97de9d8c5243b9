//! Weft's distribution over ranks (SPMD with control replication, `docs/design.md`,
//! *Distribution*): every rank sees the same tasks, so each derives, from the partitions alone
//! and the same way, who holds which piece of each store ([`holding`]) and which boxes it must
//! send and receive before a task runs ([`plan`]). [`simulate`] derives the plans of whole
//! workloads for many ranks without running them.

pub mod boxes;
pub mod comm;
pub mod distributed;
pub mod error;
pub mod holding;
#[cfg(feature = "mpi")]
pub mod mpi_comm;
#[cfg(feature = "mpi")]
mod mpi_posted;
pub mod plan;
pub mod simulate;
pub mod transfer;

pub use distributed::Distributed;
pub use error::Error;
pub use holding::{Holding, Layer};
pub use plan::{ExchangePlan, Read, Transfer, exchange};

/// The ranks this process runs among: MPI's world when built with the `mpi` feature (one
/// rank when started without `mpirun`), else one rank. MPI starts once per process: a second
/// call fails.
pub fn world() -> Result<std::rc::Rc<dyn comm::Comm>, Error> {
    #[cfg(feature = "mpi")]
    {
        mpi_comm::MpiComm::init()
            .map(|c| std::rc::Rc::new(c) as std::rc::Rc<dyn comm::Comm>)
            .ok_or_else(|| Error::Transfer("MPI was started already in this process".into()))
    }
    #[cfg(not(feature = "mpi"))]
    {
        Ok(std::rc::Rc::new(comm::Solo))
    }
}
