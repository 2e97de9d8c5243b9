//! `weft serve`: a service that runs tenants' application components.
//!
//! Tenants, their bearer tokens, weights and quotas come from a TOML file ([`config`]).
//! Jobs arrive over an HTTP/JSON API ([`api`]) and are committed to an embedded database
//! ([`records`]) before they are accepted; a weighted scheduler ([`scheduler`]) feeds a pool
//! of worker threads (`worker.rs`) that run each job with `weft-apps` on a warm runtime of its
//! tenant. [`client`] is the API's client, for the `weft` command and the tests.
//!
//! See `docs/service.md` for the API, the configuration and the guarantees.

pub mod api;
pub mod client;
pub mod config;
mod error;
pub mod events;
pub mod metrics;
pub mod ranks;
pub mod records;
pub mod retention;
pub mod scheduler;
mod service;
mod worker;

pub use client::{Client, Response, Submission};
pub use config::{ServiceConfig, TenantConfig};
pub use error::{Error, Result};
pub use ranks::follow;
pub use service::{Recovered, Server, Service, Stopper};
