//! The service on the ranks of `mpirun`: rank 0 serves the API and schedules; every rank
//! runs each job SPMD, on a runtime over all the ranks, so the job's kernels are distributed
//! as an `mpirun` application's are and its bits are one process's.
//!
//! Rank 0's one worker sends each job (its component's and inputs' bytes with it) to the
//! other ranks with the runtime's own collective (`Comm::all_gather`, MPI underneath: no
//! protocol of the service's own), then runs it; the other ranks wait in [`follow`] for the
//! next job, run it in a scratch directory of their own, and drop what it printed. A stop
//! message ends them when rank 0 stops.
//!
//! Each job runs on a communicator of its own ([`weft::Ranks::for_job`]): a rank whose part
//! of the job stops (cancelled, past a limit, failed) tells the others, whose exchanges and
//! applications then stop too instead of waiting for it; at the job's end every rank sends
//! rank 0 its outcome, and rank 0 records the job as failed where any rank's part failed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::component::Component;
use weft::{CancelToken, Ranks};
use weft_apps::AppHost;

use crate::config::ServiceConfig;
use crate::records::JobRecord;
use crate::service::Service;
use crate::worker::{tenant_job, tenant_runtime};
use crate::{Error, Result};

/// What rank 0 sends: a job, or the end.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Header {
    Job {
        id: u64,
        tenant: usize,
        name: String,
        args: Vec<String>,
        /// The component's hash, for the other ranks' caches.
        component: String,
        /// The input files' names; their bytes follow the component's, in this order.
        inputs: Vec<String>,
        /// The byte lengths of the component and of each input.
        lengths: Vec<u64>,
    },
    Stop,
}

/// The header as JSON after its length (8 bytes, little-endian), then the payloads.
fn encode(header: &Header, payloads: &[&[u8]]) -> Result<Vec<u8>> {
    let h = serde_json::to_vec(header).map_err(|e| Error::Ranks(e.to_string()))?;
    let mut out = Vec::with_capacity(8 + h.len() + payloads.iter().map(|p| p.len()).sum::<usize>());
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    for p in payloads {
        out.extend_from_slice(p);
    }
    Ok(out)
}

fn decode(bytes: &[u8]) -> Result<(Header, Vec<Vec<u8>>)> {
    let bad = |m: &str| Error::Ranks(format!("a message from rank 0: {m}"));
    let len: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad("shorter than its length"))?;
    let len = usize::try_from(u64::from_le_bytes(len)).map_err(|_| bad("too long"))?;
    let end = 8usize.checked_add(len).ok_or_else(|| bad("too long"))?;
    let header: Header = serde_json::from_slice(bytes.get(8..end).ok_or_else(|| bad("cut"))?)
        .map_err(|e| bad(&e.to_string()))?;
    let mut payloads = Vec::new();
    let mut at = end;
    if let Header::Job { lengths, .. } = &header {
        for &l in lengths {
            let l = usize::try_from(l).map_err(|_| bad("too long"))?;
            let next = at.checked_add(l).ok_or_else(|| bad("too long"))?;
            payloads.push(bytes.get(at..next).ok_or_else(|| bad("cut"))?.to_vec());
            at = next;
        }
    }
    Ok((header, payloads))
}

/// Rank 0 gives `message`; every rank gets it.
fn broadcast(ranks: &Ranks, message: &[u8]) -> Result<Vec<u8>> {
    let mine = if ranks.rank() == 0 { message } else { &[] };
    let mut all = ranks
        .0
        .all_gather(mine)
        .map_err(|e| Error::Ranks(e.to_string()))?;
    if all.is_empty() {
        return Err(Error::Ranks("no rank answered".into()));
    }
    Ok(all.swap_remove(0))
}

/// Rank 0: sends job `r` of `tenant` to the other ranks.
pub(crate) fn send_job(
    svc: &Service,
    ranks: &Ranks,
    tenant: usize,
    r: &JobRecord,
) -> std::result::Result<(), String> {
    let blob = |hash: &str| -> std::result::Result<Vec<u8>, String> {
        svc.db
            .blob(&r.tenant, hash)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("blob {hash} is gone"))
    };
    let mut payloads = vec![blob(&r.component)?];
    for hash in r.inputs.values() {
        payloads.push(blob(hash)?);
    }
    let header = Header::Job {
        id: r.id,
        tenant,
        name: r.name.clone(),
        args: r.args.clone(),
        component: r.component.clone(),
        inputs: r.inputs.keys().cloned().collect(),
        lengths: payloads.iter().map(|p| p.len() as u64).collect(),
    };
    let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let message = encode(&header, &refs).map_err(|e| e.to_string())?;
    broadcast(ranks, &message)
        .map(|_| ())
        .map_err(|e| format!("sending it to the other ranks: {e}"))
}

/// Rank 0: tells the other ranks to stop.
pub(crate) fn send_stop(ranks: &Ranks) -> Result<()> {
    broadcast(ranks, &encode(&Header::Stop, &[])?).map(|_| ())
}

/// Ranks other than 0: runs each job rank 0 sends, until it sends the stop. SIGTERM and
/// SIGINT (which `mpirun` passes to every rank) are left to rank 0, which finishes its job
/// and then sends the stop.
pub fn follow(config: &ServiceConfig, ranks: &Ranks) -> Result<()> {
    leave_signals_to_rank_0()?;
    let apps = AppHost::new().map_err(|e| Error::Start(e.to_string()))?;
    let scratch = config
        .service
        .data_dir
        .join(format!("rank-{}", ranks.rank()));
    let mut components: HashMap<String, Component> = HashMap::new();
    loop {
        let (header, mut payloads) = decode(&broadcast(ranks, &[])?)?;
        let Header::Job {
            id,
            tenant,
            name,
            args,
            component,
            inputs,
            ..
        } = header
        else {
            return Ok(());
        };
        // The job's own communicator first, before anything of the job can fail here: rank
        // 0 makes it at the same point.
        let limit = config.tenants.get(tenant).map(|t| t.time_limit_s);
        let deadline = limit.and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
        let job_ranks = ranks
            .for_job(Arc::new(CancelToken::new()), deadline)
            .map_err(|e| Error::Ranks(format!("job {id}: {e}")))?;
        let dir: PathBuf = scratch.join(id.to_string());
        let ran = (|| -> std::result::Result<i32, String> {
            if limit.is_none() || payloads.is_empty() {
                return Err("not a job of this configuration".into());
            }
            std::fs::create_dir_all(&dir).map_err(|e| format!("its directory: {e}"))?;
            for (file, bytes) in inputs.iter().zip(payloads.drain(1..)) {
                std::fs::write(dir.join(file), bytes)
                    .map_err(|e| format!("its input `{file}`: {e}"))?;
            }
            if components.len() >= config.service.components_cached.max(1) {
                components.clear();
            }
            let app = match components.get(&component) {
                Some(c) => c.clone(),
                None => {
                    let c = apps
                        .compile(&name, &payloads[0])
                        .map_err(|e| e.to_string())?;
                    components.insert(component.clone(), c.clone());
                    c
                }
            };
            let (rt, plugins) = tenant_runtime(config, tenant, Some(&job_ranks))?;
            let job = tenant_job(config, tenant, &name, &args, dir.clone(), None);
            let (outcome, _rt) = apps.run(rt, &plugins, &app, &job);
            outcome.map(|o| o.status).map_err(|e| e.to_string())
        })();
        // Its part failed (or stopped): the other ranks are told, then rank 0 takes every
        // outcome.
        let ran = ran.and_then(|status| match job_ranks.stopped() {
            Some(why) => Err(format!("it was stopped: {why}")),
            None => Ok(status),
        });
        let outcome = match ran {
            Ok(_) => String::new(),
            Err(e) => {
                eprintln!("weft serve (rank {}): job {id}: {e}", ranks.rank());
                job_ranks.stop(&e);
                e
            }
        };
        job_ranks
            .finish(&outcome)
            .map_err(|e| Error::Ranks(format!("job {id}: {e}")))?;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Installs handlers for SIGTERM and SIGINT that do nothing here (a handler, once
/// installed, stays for the life of the process).
fn leave_signals_to_rank_0() -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| Error::Start(format!("a runtime for the signal handlers: {e}")))?;
    rt.block_on(async {
        #[cfg(unix)]
        for kind in [
            tokio::signal::unix::SignalKind::terminate(),
            tokio::signal::unix::SignalKind::interrupt(),
        ] {
            tokio::signal::unix::signal(kind)
                .map(drop)
                .map_err(|e| Error::Start(format!("a signal handler: {e}")))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_cut_ones_are_errors() {
        let header = Header::Job {
            id: 7,
            tenant: 1,
            name: "app".into(),
            args: vec!["1".into()],
            component: "abc".into(),
            inputs: vec!["in.bin".into()],
            lengths: vec![3, 2],
        };
        let bytes = encode(&header, &[b"wat", b"io"]).expect("encodes");
        let (back, payloads) = decode(&bytes).expect("decodes");
        assert_eq!(back, header);
        assert_eq!(payloads, vec![b"wat".to_vec(), b"io".to_vec()]);
        for cut in [0, 5, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let stop = encode(&Header::Stop, &[]).expect("encodes");
        assert_eq!(decode(&stop).expect("decodes").0, Header::Stop);
    }
}
