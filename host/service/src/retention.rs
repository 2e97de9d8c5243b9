//! How long finished jobs are kept: a sweep deletes the records, logs and files of finished
//! jobs older than the service's `retain_s`, and of each tenant's finished jobs past its
//! `retain_jobs` newest. Queued and running jobs are never swept. Then uploaded blobs that
//! no remaining job names, last uploaded or named by an accepted job more than `retain_s`
//! ago, are deleted. The server sweeps when it opens the database and every `sweep_s`
//! seconds while it serves.

use std::collections::HashMap;

use crate::Result;
use crate::records::JobRecord;
use crate::service::Service;

/// The ids of the finished jobs among `records` that a sweep at `now_ms` deletes: those
/// finished more than `retain_s` seconds ago (none when `retain_s` is 0), and those of each
/// tenant past the `keep(tenant)` most recently finished (`None`: a tenant no longer
/// configured, whose jobs are kept by count).
pub fn expired(
    records: &[JobRecord],
    now_ms: u64,
    retain_s: u64,
    keep: impl Fn(&str) -> Option<usize>,
) -> Vec<u64> {
    let oldest_kept = (retain_s > 0).then(|| now_ms.saturating_sub(retain_s.saturating_mul(1000)));
    let mut by_tenant: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    let mut out = Vec::new();
    for r in records.iter().filter(|r| r.state.finished()) {
        let finished = r.finished_ms.unwrap_or(r.submitted_ms);
        if oldest_kept.is_some_and(|t| finished < t) {
            out.push(r.id);
        } else {
            by_tenant
                .entry(&r.tenant)
                .or_default()
                .push((finished, r.id));
        }
    }
    for (tenant, mut jobs) in by_tenant {
        let Some(keep) = keep(tenant) else { continue };
        // Newest first; among jobs finished in the same millisecond, the later id first.
        jobs.sort_unstable_by(|a, b| b.cmp(a));
        out.extend(jobs.iter().skip(keep).map(|&(_, id)| id));
    }
    out.sort_unstable();
    out
}

/// What a sweep deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Finished jobs, with their logs and files.
    pub jobs: usize,
    /// Uploaded blobs that no job names any more, last uploaded or named more than
    /// `retain_s` ago (none when `retain_s` is 0).
    pub blobs: usize,
}

impl Service {
    /// Deletes what [`expired`] names at `now_ms` (milliseconds since the Unix epoch), then
    /// the blobs no job names that are as old ([`crate::records::JobDb::sweep_blobs`]).
    pub fn sweep(&self, now_ms: u64) -> Result<Swept> {
        let retain_s = self.config.service.retain_s;
        let records = self.db.all()?;
        let ids = expired(&records, now_ms, retain_s, |name| {
            self.tenant_index(name)
                .map(|t| self.config.tenants[t].retain_jobs)
        });
        self.db.remove(&ids)?;
        let blobs = if retain_s > 0 {
            self.db
                .sweep_blobs(now_ms.saturating_sub(retain_s.saturating_mul(1000)))?
        } else {
            0
        };
        Ok(Swept {
            jobs: ids.len(),
            blobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::JobState;

    fn job(id: u64, tenant: &str, state: JobState, finished_ms: Option<u64>) -> JobRecord {
        let mut r = JobRecord::queued(
            tenant.into(),
            "app".into(),
            "c".into(),
            vec![],
            Default::default(),
            1,
        );
        r.id = id;
        r.state = state;
        r.finished_ms = finished_ms;
        r
    }

    #[test]
    fn old_jobs_and_each_tenants_oldest_past_its_count_are_swept_never_live_ones() {
        use JobState::*;
        let records = [
            job(1, "a", Succeeded, Some(1_000)),
            job(2, "a", Failed, Some(50_000)),
            job(3, "a", Cancelled, Some(60_000)),
            job(4, "a", Succeeded, Some(70_000)),
            job(5, "a", Queued, None),
            job(6, "a", Running, None),
            job(7, "b", Succeeded, Some(2_000)),
            job(8, "b", Succeeded, Some(80_000)),
            job(9, "gone", Succeeded, Some(90_000)),
        ];
        let keep = |t: &str| match t {
            "a" => Some(2),
            "b" => Some(5),
            _ => None,
        };
        // Kept 60 s at 100 s: jobs finished before 40 s go (1 and 7); of a's others, its two
        // newest stay (4, 3) and 2 goes.
        assert_eq!(expired(&records, 100_000, 60, keep), vec![1, 2, 7]);
        // Kept forever: only the counts.
        assert_eq!(expired(&records, 100_000, 0, keep), vec![1, 2]);
        // Everything old: every finished job goes, whatever its tenant; live ones stay.
        assert_eq!(
            expired(&records, 10_000_000, 60, keep),
            vec![1, 2, 3, 4, 7, 8, 9]
        );
    }
}
