//! `weft serve` under load, in this process: a service on 127.0.0.1 with two workers, its
//! HTTP client, and the `tiny_add` application component (adds two 8-element arrays and
//! prints the sum). Two measurements:
//!
//! - one job at a time, `--n` of them after a warm-up (the component uploaded and compiled,
//!   the tenant's runtime warm): the time from `POST /v1/jobs` to the job's `end` event, as
//!   the client sees it;
//! - a load: 8 tenants each submitting `min(--n, 50)` jobs at once from their own threads;
//!   jobs per second from the first submission to the last end, and each job's latency from
//!   acceptance to finish as its record gives them (millisecond clock).
//!
//! Prints one JSON line with the medians and 99th percentiles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_examples::{AppError, Cli, timing::median};
use weft_service::records::{JobRecord, JobState};
use weft_service::{Client, Server, Service, ServiceConfig};

const TENANTS: usize = 8;
const PATIENCE: Duration = Duration::from_secs(600);

fn token(t: usize) -> String {
    format!("tenant-{t}-token-0123456789")
}

/// The `q`-quantile of `samples` (nearest rank).
fn quantile(samples: &[f64], q: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let at = ((s.len() as f64 * q).ceil() as usize).clamp(1, s.len().max(1)) - 1;
    s.get(at).copied().unwrap_or(f64::NAN)
}

fn submit(c: &Client, blob: &str) -> Result<u64, AppError> {
    let r = c.submit_uploaded(blob, "tiny_add", &[], &BTreeMap::new())?;
    Ok(r.json::<JobRecord>()?.id)
}

fn run() -> Result<(), AppError> {
    let cli = Cli::new(
        "bench_service",
        "tiny jobs through weft serve's HTTP API: one at a time, and 8 tenants at once",
        200,
        1,
    );
    let args = cli.parse_env_or_exit();
    let dir = std::env::temp_dir().join(format!("weft-bench-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tenants: String = (0..TENANTS)
        .map(|t| {
            format!(
                "[[tenant]]\nname = \"t{t}\"\ntoken = \"{}\"\nmax_running = 2\n",
                token(t)
            )
        })
        .collect();
    let mut config = ServiceConfig::parse(&format!(
        "[service]\nlisten = \"127.0.0.1:0\"\nworkers = 2\nthreads_per_job = {}\n{tenants}",
        args.threads.min(2)
    ))?;
    config.service.data_dir = dir.clone();
    let (service, _) = Service::open(config)?;
    let server = Server::start(Arc::clone(&service))?;
    let addr = format!("http://{}", server.addr());
    let stopper = server.stopper();
    let serving = std::thread::spawn(move || server.serve());

    // One at a time.
    let c = Client::new(&addr, &token(0))?;
    let blob = c.upload(weft_plugin_artifacts::APP_TINY_ADD.to_vec())?;
    for _ in 0..5 {
        let id = submit(&c, &blob)?;
        c.wait(id, PATIENCE)?;
    }
    let mut one = Vec::new();
    for _ in 0..args.n {
        let start = Instant::now();
        let id = submit(&c, &blob)?;
        c.events(id, PATIENCE, |_, _| {})?;
        one.push(start.elapsed().as_secs_f64() * 1e3);
    }

    // The load.
    let per_tenant = usize::try_from(args.n)?.min(50);
    let start = Instant::now();
    let threads: Vec<_> = (0..TENANTS)
        .map(|t| {
            let addr = addr.clone();
            std::thread::spawn(move || -> Result<Vec<JobRecord>, String> {
                let c = Client::new(&addr, &token(t)).map_err(|e| e.to_string())?;
                let blob = c
                    .upload(weft_plugin_artifacts::APP_TINY_ADD.to_vec())
                    .map_err(|e| e.to_string())?;
                let ids = (0..per_tenant)
                    .map(|_| submit(&c, &blob).map_err(|e| e.to_string()))
                    .collect::<Result<Vec<u64>, String>>()?;
                ids.into_iter()
                    .map(|id| c.wait(id, PATIENCE).map_err(|e| e.to_string()))
                    .collect()
            })
        })
        .collect();
    let mut records = Vec::new();
    for t in threads {
        records.extend(t.join().map_err(|_| "a submitter panicked")??);
    }
    let load_seconds = start.elapsed().as_secs_f64();
    let ok = records
        .iter()
        .filter(|r| r.state == JobState::Succeeded)
        .count();
    let latency: Vec<f64> = records
        .iter()
        .filter_map(|r| Some(r.finished_ms?.saturating_sub(r.submitted_ms) as f64))
        .collect();
    stopper.stop();
    serving.join().map_err(|_| "the server panicked")??;
    let _ = std::fs::remove_dir_all(&dir);
    let line = serde_json::json!({
        "example": "bench_service",
        "workers": 2,
        "tiny_jobs_one_at_a_time": args.n,
        "tiny_job_ms_p50": median(&one),
        "tiny_job_ms_p99": quantile(&one, 0.99),
        "load_tenants": TENANTS,
        "load_jobs": records.len(),
        "load_jobs_succeeded": ok,
        "load_seconds": load_seconds,
        "load_jobs_per_second": records.len() as f64 / load_seconds,
        "load_latency_ms_p50": median(&latency),
        "load_latency_ms_p99": quantile(&latency, 0.99),
    });
    println!("{line}");
    Ok(())
}

fn main() -> std::process::ExitCode {
    weft_examples::run_main("bench_service", run)
}
