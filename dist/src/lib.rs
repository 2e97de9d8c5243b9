//! Weft's distribution over ranks (SPMD with control replication, `docs/design.md`,
//! *Distribution*): every rank sees the same tasks, so each derives, from the partitions alone
//! and the same way, who holds which piece of each store ([`holding`]) and which boxes it must
//! send and receive before a task runs ([`plan`]). [`simulate`] derives the plans of whole
//! workloads for many ranks without running them.

pub mod boxes;
pub mod comm;
pub mod error;
pub mod holding;
#[cfg(feature = "mpi")]
pub mod mpi_comm;
pub mod plan;
pub mod simulate;
pub mod transfer;

pub use error::Error;
pub use holding::{Holding, Layer};
pub use plan::{ExchangePlan, Read, Transfer, exchange};
