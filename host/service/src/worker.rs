//! A worker thread: takes the next job from the scheduler, runs it on a warm runtime of its
//! tenant, and records how it ended.
//!
//! Each worker keeps up to `runtimes_per_worker` runtimes warm, one per tenant it served
//! lately (plugins loaded, kernels compiled), so a tenant's next job starts without loading
//! anything; a runtime is only ever used by its own tenant's jobs, under that tenant's store
//! and kernel-time quotas. A runtime whose job failed is dropped, not reused.
//!
//! On the ranks of `mpirun` (see [`crate::ranks`]) there is one worker, on rank 0's main
//! thread: it sends each job to the other ranks before it runs it on a runtime over all of
//! them (on a communicator of the job's own: [`weft::Ranks::for_job`]), and keeps no
//! runtime warm (every rank makes the same fresh one for each job). When its part of the
//! job ends, it takes every rank's outcome.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::{CancelToken, Config, Ranks, Runtime};
use weft_apps::{AppLimits, Job, OutputSink, Stream};
use weft_runtime::PluginId;

use crate::config::ServiceConfig;
use crate::events::{finished_events, state_event};
use crate::records::{JobLogs, JobRecord, JobState, JobStats};
use crate::service::{Service, now_ms};

/// A warm runtime of one tenant.
struct Warm {
    tenant: usize,
    rt: Runtime,
    plugins: Vec<PluginId>,
    used: u64,
}

/// The worker loop, until the scheduler stops.
pub(crate) fn work(svc: &Arc<Service>, worker: usize, ranks: Option<&Ranks>) {
    let mut warm: Vec<Warm> = Vec::new();
    let mut clock = 0u64;
    while let Some((tenant, id)) = svc.scheduler.next() {
        clock += 1;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_one(svc, &mut warm, tenant, id, clock, ranks)
        }));
        if ran.is_err() {
            // A bug of the host, not of the job: it is reported as the job's failure, and
            // the worker goes on with fresh runtimes.
            warm.clear();
            fail_unfinished(svc, id, "the service failed running it (a host bug)");
        }
        svc.cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let held: u64 = warm.iter_mut().map(|w| w.rt.memory().1).sum();
        svc.metrics.worker(worker, warm.len(), held);
        svc.scheduler.done(tenant);
    }
}

/// Records job `id` as failed with `message`, where it has not finished.
fn fail_unfinished(svc: &Service, id: u64, message: &str) {
    if let Ok(Some(mut r)) = svc.db.get(id)
        && !r.state.finished()
    {
        r.state = JobState::Failed;
        r.error = Some(message.into());
        r.finished_ms = Some(now_ms());
        let logs = JobLogs::default();
        if svc.db.put(&r, Some(&logs)).is_ok() {
            svc.events.close(id, finished_events(&r, &logs, true));
        }
    }
}

/// Runs job `id` of `tenant`.
fn run_one(
    svc: &Service,
    warm: &mut Vec<Warm>,
    tenant: usize,
    id: u64,
    clock: u64,
    ranks: Option<&Ranks>,
) {
    let Ok(Some(mut record)) = svc.db.get(id) else {
        return;
    };
    if record.state != JobState::Queued {
        return;
    }
    let cancel = svc
        .cancels
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(id)
        .or_default()
        .clone();
    record.state = JobState::Running;
    record.started_ms = Some(now_ms());
    if let Err(e) = svc.db.put(&record, None) {
        fail_unfinished(svc, id, &e.to_string());
        return;
    }
    svc.events.send(id, state_event(&record));
    let start = Instant::now();
    // Over ranks, the job runs on a communicator of its own, made by every rank once it
    // has the job, so that a stop on one rank reaches the others.
    let mut job_ranks = None;
    let prepared = prepare(svc, &record).and_then(|component| {
        if let Some(ranks) = ranks {
            crate::ranks::send_job(svc, ranks, tenant, &record)?;
            let deadline =
                start.checked_add(Duration::from_secs(svc.config.tenants[tenant].time_limit_s));
            job_ranks = Some(
                ranks
                    .for_job(cancel.clone(), deadline)
                    .map_err(|e| format!("its ranks: {e}"))?,
            );
        }
        Ok(component)
    });
    let (result, logs) = match prepared {
        Ok(component) => {
            let rt = take_runtime(svc, warm, tenant, job_ranks.as_ref());
            match rt {
                Ok(w) => {
                    // Over ranks, every rank makes a fresh runtime for each job.
                    let keep = if ranks.is_some() {
                        0
                    } else {
                        svc.config.service.runtimes_per_worker
                    };
                    run_on(
                        svc,
                        warm,
                        keep,
                        w,
                        &component,
                        &record,
                        cancel.clone(),
                        clock,
                    )
                }
                Err(e) => (Err(e), JobLogs::default()),
            }
        }
        Err(e) => (Err(e), JobLogs::default()),
    };
    let result = match &job_ranks {
        Some(job_ranks) => with_other_ranks(job_ranks, result),
        None => result,
    };
    let seconds = start.elapsed().as_secs_f64();
    finish(&mut record, result, &cancel);
    let outputs = list_files(&svc.db.job_dir(id));
    let quota = svc.config.tenants[tenant].output_bytes;
    let total: u64 = outputs.values().sum();
    if total > quota {
        // Whatever else happened to the job, files past the quota are not kept.
        let _ = std::fs::remove_dir_all(svc.db.job_dir(id));
        let note = format!(
            "its files held {total} bytes, over its tenant's output quota of {quota}; they were removed"
        );
        record.error = Some(match record.error.take() {
            Some(e) => format!("{e}; {note}"),
            None => note,
        });
        if record.state == JobState::Succeeded {
            record.state = JobState::Failed;
        }
    } else {
        record.outputs = outputs;
    }
    record.finished_ms = Some(now_ms());
    if let Err(e) = svc.db.put(&record, Some(&logs)) {
        // The record stays `running`; a restart reports it as failed.
        eprintln!("weft serve: recording job {id}: {e}");
    }
    svc.metrics
        .finished(tenant, record.state, &record.stats, seconds);
    svc.events.close(id, finished_events(&record, &logs, false));
}

/// What a run gave: the exit status and stats, or why it failed.
type Ran = Result<(i32, JobStats), String>;

/// Rank 0's end of a job over ranks: the others are told if its part failed (or stopped),
/// and the job fails with the first other rank's error where its own part succeeded.
fn with_other_ranks(job_ranks: &Ranks, ran: Ran) -> Ran {
    // Stopped while its application went on (one that exits on a failed call): it failed.
    let ran = match (ran, job_ranks.stopped()) {
        (Ok(_), Some(why)) => Err(format!("it was stopped: {why}")),
        (ran, _) => ran,
    };
    let mine = match &ran {
        Ok(_) => String::new(),
        Err(e) => {
            job_ranks.stop(e);
            e.clone()
        }
    };
    let all = match job_ranks.finish(&mine) {
        Ok(all) => all,
        Err(e) => return Err(format!("ending it on the other ranks: {e}")),
    };
    match ran {
        Ok(ok) => match all.iter().enumerate().skip(1).find(|(_, e)| !e.is_empty()) {
            Some((rank, e)) => Err(format!("on rank {rank}: {e}")),
            None => Ok(ok),
        },
        Err(e) => Err(e),
    }
}

/// Sets the record's final state from what the run gave.
fn finish(record: &mut JobRecord, ran: Ran, cancel: &CancelToken) {
    match ran {
        Ok((status, stats)) => {
            record.exit_status = Some(status);
            record.stats = stats;
            record.state = if status == 0 {
                JobState::Succeeded
            } else {
                JobState::Failed
            };
        }
        Err(e) => {
            record.error = Some(e);
            record.state = if cancel.is_cancelled() {
                JobState::Cancelled
            } else {
                JobState::Failed
            };
        }
    }
}

/// The job's directory with its inputs written, and its component compiled (or cached).
fn prepare(svc: &Service, r: &JobRecord) -> Result<wasmtime::component::Component, String> {
    let dir = svc.db.job_dir(r.id);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating its directory: {e}"))?;
    for (name, blob) in &r.inputs {
        let bytes = svc
            .db
            .blob(&r.tenant, blob)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("its input `{name}` (blob {blob}) is gone"))?;
        std::fs::write(dir.join(name), bytes)
            .map_err(|e| format!("writing input `{name}`: {e}"))?;
    }
    let key = format!("{}/{}", r.tenant, r.component);
    svc.components.get_or(&key, || {
        let bytes = svc
            .db
            .blob(&r.tenant, &r.component)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("its component (blob {}) is gone", r.component))?;
        svc.apps.compile(&r.name, &bytes).map_err(|e| e.to_string())
    })
}

/// The tenant's warm runtime, or a new one.
fn take_runtime(
    svc: &Service,
    warm: &mut Vec<Warm>,
    tenant: usize,
    ranks: Option<&Ranks>,
) -> Result<Warm, String> {
    if let Some(at) = warm.iter().position(|w| w.tenant == tenant) {
        return Ok(warm.swap_remove(at));
    }
    let (rt, plugins) = tenant_runtime(&svc.config, tenant, ranks)?;
    Ok(Warm {
        tenant,
        rt,
        plugins,
        used: 0,
    })
}

/// A new runtime for `tenant`'s jobs, under its quotas, with numeric and sparse loaded (over
/// `ranks` where given).
pub(crate) fn tenant_runtime(
    config: &ServiceConfig,
    tenant: usize,
    ranks: Option<&Ranks>,
) -> Result<(Runtime, Vec<PluginId>), String> {
    let t = &config.tenants[tenant];
    let mut rc = Config::from_env();
    rc.threads = config.service.threads_per_job;
    rc.limits.store_bytes = t.store_bytes;
    rc.limits.kernel_time = Some(Duration::from_millis(t.kernel_time_ms));
    rc.summarize = true;
    rc.explain_to_stderr = false;
    rc.ranks = ranks.cloned();
    let mut rt = Runtime::new(rc).map_err(|e| format!("starting its runtime: {e}"))?;
    let mut plugins = Vec::new();
    for bytes in [
        weft_plugin_artifacts::NUMERIC,
        weft_plugin_artifacts::SPARSE,
    ] {
        plugins.push(
            rt.load(bytes)
                .map_err(|e| format!("loading a plugin: {e}"))?,
        );
    }
    Ok((rt, plugins))
}

/// Job `name` of `tenant` with `args`, in `dir`, under the tenant's limits.
pub(crate) fn tenant_job(
    config: &ServiceConfig,
    tenant: usize,
    name: &str,
    args: &[String],
    dir: PathBuf,
    cancel: Option<Arc<CancelToken>>,
) -> Job {
    let t = &config.tenants[tenant];
    Job {
        name: name.to_string(),
        args: args.to_vec(),
        env: Vec::new(),
        dir: Some(dir),
        capture: true,
        limits: AppLimits {
            memory_bytes: usize::try_from(t.memory_mb.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            time: Duration::from_secs(t.time_limit_s),
            output_bytes: usize::try_from(t.output_bytes).unwrap_or(usize::MAX),
            dir_bytes: Some(t.output_bytes),
        },
        output: None,
        cancel,
    }
}

/// Runs the job on `w`, which goes back among the warm runtimes if the job ran cleanly.
#[allow(clippy::too_many_arguments)]
fn run_on(
    svc: &Service,
    warm: &mut Vec<Warm>,
    keep: usize,
    mut w: Warm,
    component: &wasmtime::component::Component,
    r: &JobRecord,
    cancel: Arc<CancelToken>,
    clock: u64,
) -> (Ran, JobLogs) {
    let mut job = tenant_job(
        &svc.config,
        w.tenant,
        &r.name,
        &r.args,
        svc.db.job_dir(r.id),
        Some(cancel),
    );
    job.output = Some(live_output(svc.events.clone(), r.id));
    let before = w.rt.stats();
    let (outcome, mut rt) = svc.apps.run(w.rt, &w.plugins, component, &job);
    let after = rt.stats();
    let explain = rt.take_summaries();
    let stats = |made, replayed| JobStats {
        tasks_submitted: after.tasks_submitted - before.tasks_submitted,
        tasks_executed: after.exec.tasks_executed - before.exec.tasks_executed,
        plugin_calls_made: made,
        plugin_calls_replayed: replayed,
        kernel_us: ((after.kernel_seconds() - before.kernel_seconds()) * 1e6) as u64,
    };
    match outcome {
        Ok(o) => {
            let logs = JobLogs {
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
                explain,
            };
            w.rt = rt;
            w.used = clock;
            if keep > 0 {
                keep_warm(warm, w, keep);
            }
            (Ok((o.status, stats(o.calls_made, o.calls_replayed))), logs)
        }
        Err(e) => (
            Err(e.to_string()),
            JobLogs {
                explain,
                ..JobLogs::default()
            },
        ),
    }
}

/// A sink that sends each write of job `id`'s output as an event (`stdout` or `stderr`,
/// its text; a character split between two writes comes out as replacement characters
/// there, and whole in the job's logs).
fn live_output(events: Arc<crate::events::Events>, id: u64) -> OutputSink {
    OutputSink(Arc::new(move |stream, bytes: &[u8]| {
        let kind = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        events.send(
            id,
            crate::events::Event {
                kind,
                data: serde_json::json!(String::from_utf8_lossy(bytes)),
            },
        );
    }))
}

/// Keeps `w` warm, dropping the least recently used runtime past `bound`.
fn keep_warm(warm: &mut Vec<Warm>, w: Warm, bound: usize) {
    if warm.len() >= bound
        && let Some(oldest) = warm
            .iter()
            .enumerate()
            .min_by_key(|(_, x)| x.used)
            .map(|(i, _)| i)
    {
        warm.swap_remove(oldest);
    }
    warm.push(w);
}

/// The regular files directly in `dir`, with their sizes.
fn list_files(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if let (Ok(meta), Some(name)) = (e.metadata(), e.file_name().to_str())
                && meta.is_file()
            {
                out.insert(name.to_string(), meta.len());
            }
        }
    }
    out
}
