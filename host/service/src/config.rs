//! The service's configuration file (TOML): where it listens and keeps its data, its worker
//! pool, and each tenant with its token, weight and quotas.
//!
//! ```toml
//! [service]
//! listen = "127.0.0.1:7878"
//! data_dir = "weft-data"
//! workers = 2
//!
//! [[tenant]]
//! name = "alice"
//! token = "a long random secret"
//! weight = 2
//! max_running = 2
//! max_queued = 100
//! retain_jobs = 1000
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Error, Result};

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// The service itself.
    #[serde(default)]
    pub service: ServiceSection,
    /// The tenants (`[[tenant]]` tables); at least one.
    #[serde(rename = "tenant", default)]
    pub tenants: Vec<TenantConfig>,
}

/// The `[service]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceSection {
    /// The address to listen on (`127.0.0.1:0` picks a free port; the service prints the
    /// one it got).
    pub listen: String,
    /// Where the job database, the uploaded blobs and each job's directory live. A relative
    /// path is taken from the configuration file's directory.
    pub data_dir: PathBuf,
    /// Worker threads: jobs that run at once, over all tenants (default: one per core).
    pub workers: usize,
    /// Threads each job's runtime runs kernels on.
    pub threads_per_job: usize,
    /// The most jobs queued over all tenants; past it, submissions get 429.
    pub queue_limit: usize,
    /// The largest request body (an uploaded component or input), in bytes.
    pub max_body_bytes: usize,
    /// The most tenant runtimes (plugins loaded, kernels compiled) each worker keeps warm.
    pub runtimes_per_worker: usize,
    /// The most compiled application components kept in memory.
    pub components_cached: usize,
    /// A bearer token `GET /metrics` requires; without one, metrics are open to anyone who
    /// can reach the address.
    pub metrics_token: Option<String>,
    /// How long a finished job (its record, logs and files) is kept, in seconds; older ones
    /// are deleted by the next sweep (`0`: kept until the count bound of its tenant,
    /// `retain_jobs`, removes them).
    pub retain_s: u64,
    /// How often finished jobs are swept, in seconds.
    pub sweep_s: u64,
}

impl Default for ServiceSection {
    fn default() -> Self {
        ServiceSection {
            listen: "127.0.0.1:7878".into(),
            data_dir: PathBuf::from("weft-data"),
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            threads_per_job: 1,
            queue_limit: 4096,
            max_body_bytes: 64 << 20,
            runtimes_per_worker: 8,
            components_cached: 64,
            metrics_token: None,
            retain_s: 7 * 24 * 3600,
            sweep_s: 60,
        }
    }
}

/// One `[[tenant]]` table: who it is, how it proves it, its share and its quotas.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Its name, in job records and metrics.
    pub name: String,
    /// The bearer token its requests carry (`Authorization: Bearer TOKEN`).
    pub token: String,
    /// Its share of the worker pool against other tenants with queued jobs.
    #[serde(default = "one")]
    pub weight: u32,
    /// Its jobs that may run at once.
    #[serde(default = "one_usize")]
    pub max_running: usize,
    /// Its jobs that may wait at once; past it, submissions get 429.
    #[serde(default = "hundred")]
    pub max_queued: usize,
    /// The most bytes its stores may hold at once, in one job's runtime.
    #[serde(default = "gib")]
    pub store_bytes: u64,
    /// The longest one kernel launch of its jobs may run, in milliseconds.
    #[serde(default = "ten_seconds_ms")]
    pub kernel_time_ms: u64,
    /// The longest one of its jobs may run, in seconds.
    #[serde(default = "ten_minutes")]
    pub time_limit_s: u64,
    /// The most linear memory one of its applications may hold, in MiB.
    #[serde(default = "quarter_gib_mb")]
    pub memory_mb: u64,
    /// The most bytes one of its jobs may write: standard output and standard error each,
    /// and its files together.
    #[serde(default = "sixteen_mib")]
    pub output_bytes: u64,
    /// The most bytes its uploaded blobs (components and inputs) may hold together.
    #[serde(default = "gib")]
    pub upload_bytes: u64,
    /// The most finished jobs of its kept: past it, a sweep deletes its oldest finished
    /// jobs (records, logs and files) first.
    #[serde(default = "thousand")]
    pub retain_jobs: usize,
}

fn one() -> u32 {
    1
}
fn one_usize() -> usize {
    1
}
fn hundred() -> usize {
    100
}
fn thousand() -> usize {
    1000
}
fn gib() -> u64 {
    1 << 30
}
fn ten_seconds_ms() -> u64 {
    10_000
}
fn ten_minutes() -> u64 {
    600
}
fn quarter_gib_mb() -> u64 {
    256
}
fn sixteen_mib() -> u64 {
    16 << 20
}

impl ServiceConfig {
    /// Reads and checks the file at `path`; a relative `data_dir` is resolved against the
    /// file's directory.
    pub fn load(path: &Path) -> Result<ServiceConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let mut config = ServiceConfig::parse(&text)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        if config.service.data_dir.is_relative()
            && let Some(dir) = path.parent()
        {
            config.service.data_dir = dir.join(&config.service.data_dir);
        }
        Ok(config)
    }

    /// Parses and checks a configuration's text.
    pub fn parse(text: &str) -> Result<ServiceConfig> {
        let config: ServiceConfig =
            toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Names, tokens and numbers that make sense.
    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.tenants.is_empty() {
            return bad("no [[tenant]] is configured".into());
        }
        let s = &self.service;
        if s.workers == 0 || s.threads_per_job == 0 || s.runtimes_per_worker == 0 || s.sweep_s == 0
        {
            return bad(
                "workers, threads_per_job, runtimes_per_worker and sweep_s must be at least 1"
                    .into(),
            );
        }
        let (mut names, mut tokens) = (HashSet::new(), HashSet::new());
        for t in &self.tenants {
            if t.name.is_empty()
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return bad(format!(
                    "tenant name `{}` must be letters, digits, `-` or `_`",
                    t.name
                ));
            }
            if !names.insert(&t.name) {
                return bad(format!("tenant `{}` is configured twice", t.name));
            }
            if t.token.len() < 16 {
                return bad(format!(
                    "tenant `{}`: its token must be at least 16 characters",
                    t.name
                ));
            }
            if !tokens.insert(&t.token) {
                return bad(format!("tenant `{}` shares its token with another", t.name));
            }
            if t.weight == 0 || t.max_running == 0 {
                return bad(format!(
                    "tenant `{}`: weight and max_running must be at least 1",
                    t.name
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [service]
        listen = "127.0.0.1:0"
        workers = 2
        [[tenant]]
        name = "alice"
        token = "0123456789abcdef"
        weight = 3
        [[tenant]]
        name = "bob"
        token = "fedcba9876543210"
    "#;

    #[test]
    fn a_good_file_parses_with_its_defaults() {
        let c = ServiceConfig::parse(GOOD).expect("parses");
        assert_eq!(c.service.workers, 2);
        assert_eq!(c.tenants.len(), 2);
        assert_eq!(c.tenants[0].weight, 3);
        assert_eq!(c.tenants[1].weight, 1);
        assert_eq!(c.tenants[1].max_queued, 100);
        assert_eq!(c.tenants[1].retain_jobs, 1000);
        assert_eq!(c.service.retain_s, 7 * 24 * 3600);
    }

    #[test]
    fn bad_files_are_refused_with_what_is_wrong() {
        let cases = [
            (
                GOOD.replace("fedcba9876543210", "0123456789abcdef"),
                "shares its token",
            ),
            (GOOD.replace("fedcba9876543210", "short"), "at least 16"),
            (GOOD.replace("\"bob\"", "\"alice\""), "configured twice"),
            (GOOD.replace("\"bob\"", "\"b o b\""), "must be letters"),
            (GOOD.replace("weight = 3", "weight = 0"), "at least 1"),
            (
                GOOD.replace("workers = 2", "workers = 2\nworkerz = 1"),
                "unknown field",
            ),
            ("[service]\nworkers = 1\n".to_string(), "no [[tenant]]"),
        ];
        for (text, expect) in cases {
            let e = ServiceConfig::parse(&text).expect_err(expect).to_string();
            assert!(e.contains(expect), "{expect}: {e}");
        }
    }
}
