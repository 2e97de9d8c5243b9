//! Job records and their database: each job's record, its logs and the tenants' uploaded
//! blobs, in one `redb` file that every change is committed to (and synced) before the
//! service answers, so an accepted job survives a crash of the process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Job records by id, as JSON.
const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");
/// Job logs (standard output and error, fusion summaries) by job id, as JSON.
const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("logs");
/// Uploaded blobs by `tenant/hash`.
const BLOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("blobs");
/// The bytes of each tenant's blobs together, by tenant.
const BLOB_BYTES: TableDefinition<&str, u64> = TableDefinition::new("blob-bytes");
/// When each blob was last uploaded or named by an accepted job (milliseconds since the
/// Unix epoch), by `tenant/hash`: a blob no job names is swept once this is old enough.
const BLOB_TIMES: TableDefinition<&str, u64> = TableDefinition::new("blob-times");
/// Counters: `next-id`, the id the next job gets (ids are never given twice, even when the
/// newest records were deleted by [`JobDb::remove`]).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// What storing a blob did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// It is stored (or was already), under this hash.
    Blob(String),
    /// It was not: the tenant's blobs hold `held` bytes, and these would pass its quota.
    OverQuota {
        /// The bytes the tenant's blobs hold.
        held: u64,
    },
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Accepted and waiting for a worker.
    Queued,
    /// On a worker.
    Running,
    /// Its application exited with status 0.
    Succeeded,
    /// Its application exited with another status, failed (a trap, a limit), or the
    /// service restarted while it ran.
    Failed,
    /// Cancelled by its tenant.
    Cancelled,
}

impl JobState {
    /// Every state, in the order metrics list them.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// Whether the job is over.
    pub fn finished(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }

    /// Its name in records and metrics.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// What the runtime did for a job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStats {
    /// Tasks its plugin calls submitted.
    pub tasks_submitted: u64,
    /// Tasks run after fusion.
    pub tasks_executed: u64,
    /// Plugin calls that entered a plugin.
    pub plugin_calls_made: u64,
    /// Plugin calls replayed from a recording.
    pub plugin_calls_replayed: u64,
    /// Microseconds its tasks' kernels ran (`weft_runtime::Stats::kernel_seconds`).
    #[serde(default)]
    pub kernel_us: u64,
}

/// One job, as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its id.
    pub id: u64,
    /// The tenant that submitted it.
    pub tenant: String,
    /// Its name (the application's `argv[0]`).
    pub name: String,
    /// The blob of its application component.
    pub component: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its input files: name in its directory, blob.
    pub inputs: BTreeMap<String, String>,
    /// Where it is.
    pub state: JobState,
    /// When it was accepted, started and finished, in milliseconds since the Unix epoch.
    pub submitted_ms: u64,
    /// See `submitted_ms`.
    pub started_ms: Option<u64>,
    /// See `submitted_ms`.
    pub finished_ms: Option<u64>,
    /// The application's exit status, where it exited.
    pub exit_status: Option<i32>,
    /// Why it failed, where it did not exit.
    pub error: Option<String>,
    /// The files its directory holds after it ran (inputs included), with their sizes.
    pub outputs: BTreeMap<String, u64>,
    /// What the runtime did for it.
    pub stats: JobStats,
}

impl JobRecord {
    /// A new job of `tenant`, queued at `submitted_ms` (its id is given when it is stored,
    /// [`JobDb::insert`]).
    pub fn queued(
        tenant: String,
        name: String,
        component: String,
        args: Vec<String>,
        inputs: BTreeMap<String, String>,
        submitted_ms: u64,
    ) -> JobRecord {
        JobRecord {
            id: 0,
            tenant,
            name,
            component,
            args,
            inputs,
            state: JobState::Queued,
            submitted_ms,
            started_ms: None,
            finished_ms: None,
            exit_status: None,
            error: None,
            outputs: BTreeMap::new(),
            stats: JobStats::default(),
        }
    }
}

/// A job's logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLogs {
    /// Its standard output (lossily UTF-8).
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// The fusion summaries of its runs of the window (as `WEFT_EXPLAIN=1` prints them).
    pub explain: Vec<String>,
}

/// The database, and the directory of the jobs' files.
pub struct JobDb {
    db: Database,
    jobs_dir: PathBuf,
}

fn db_err(e: impl std::fmt::Display) -> Error {
    Error::Database(e.to_string())
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(db_err)
}

fn from_json<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T> {
    serde_json::from_slice(b).map_err(db_err)
}

/// The blob key of `hash` for `tenant`: blobs are per tenant, so one tenant cannot learn
/// or use another's.
fn blob_key(tenant: &str, hash: &str) -> String {
    format!("{tenant}/{hash}")
}

impl JobDb {
    /// Opens (or creates) the database under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<JobDb> {
        let jobs_dir = data_dir.join("jobs");
        std::fs::create_dir_all(&jobs_dir)
            .map_err(|e| Error::io(format!("creating {}", jobs_dir.display()), e))?;
        let db = Database::create(data_dir.join("jobs.redb")).map_err(db_err)?;
        let tx = db.begin_write().map_err(db_err)?;
        tx.open_table(JOBS).map_err(db_err)?;
        tx.open_table(LOGS).map_err(db_err)?;
        tx.open_table(BLOBS).map_err(db_err)?;
        tx.open_table(BLOB_BYTES).map_err(db_err)?;
        tx.open_table(BLOB_TIMES).map_err(db_err)?;
        tx.open_table(META).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(JobDb { db, jobs_dir })
    }

    /// The directory of job `id`'s files (its application's `.`).
    pub fn job_dir(&self, id: u64) -> PathBuf {
        self.jobs_dir.join(id.to_string())
    }

    /// Stores `bytes` as a blob of `tenant` (under its hash, BLAKE3 in hex) at `now_ms`,
    /// unless its blobs together would then hold more than `quota` bytes. The same bytes
    /// stored again cost nothing (their time is renewed).
    pub fn put_blob(&self, tenant: &str, bytes: &[u8], quota: u64, now_ms: u64) -> Result<Stored> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let key = blob_key(tenant, &hash);
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut t = tx.open_table(BLOBS).map_err(db_err)?;
            let mut times = tx.open_table(BLOB_TIMES).map_err(db_err)?;
            if t.get(key.as_str()).map_err(db_err)?.is_none() {
                let mut sizes = tx.open_table(BLOB_BYTES).map_err(db_err)?;
                let held = sizes.get(tenant).map_err(db_err)?.map_or(0, |g| g.value());
                let after = held.saturating_add(bytes.len() as u64);
                if after > quota {
                    return Ok(Stored::OverQuota { held });
                }
                t.insert(key.as_str(), bytes).map_err(db_err)?;
                sizes.insert(tenant, after).map_err(db_err)?;
            }
            times.insert(key.as_str(), now_ms).map_err(db_err)?;
        }
        tx.commit().map_err(db_err)?;
        Ok(Stored::Blob(hash))
    }

    /// Deletes the blobs that no job record names and that were last uploaded or named
    /// before `before_ms` (a blob stored before blobs had times counts as old), in one
    /// commit with their tenants' byte counts; returns how many.
    pub fn sweep_blobs(&self, before_ms: u64) -> Result<usize> {
        let tx = self.db.begin_write().map_err(db_err)?;
        let mut gone = Vec::new();
        {
            let jobs = tx.open_table(JOBS).map_err(db_err)?;
            let mut named = std::collections::HashSet::new();
            for entry in jobs.iter().map_err(db_err)? {
                let (_, v) = entry.map_err(db_err)?;
                let r: JobRecord = from_json(v.value())?;
                named.insert(blob_key(&r.tenant, &r.component));
                for hash in r.inputs.values() {
                    named.insert(blob_key(&r.tenant, hash));
                }
            }
            let mut blobs = tx.open_table(BLOBS).map_err(db_err)?;
            let mut times = tx.open_table(BLOB_TIMES).map_err(db_err)?;
            let mut sizes = tx.open_table(BLOB_BYTES).map_err(db_err)?;
            for entry in blobs.iter().map_err(db_err)? {
                let (k, v) = entry.map_err(db_err)?;
                let key = k.value().to_string();
                let when = times
                    .get(key.as_str())
                    .map_err(db_err)?
                    .map_or(0, |g| g.value());
                if when < before_ms && !named.contains(&key) {
                    gone.push((key, v.value().len() as u64));
                }
            }
            for (key, len) in &gone {
                blobs.remove(key.as_str()).map_err(db_err)?;
                times.remove(key.as_str()).map_err(db_err)?;
                let tenant = key.split_once('/').map_or(key.as_str(), |(t, _)| t);
                let held = sizes.get(tenant).map_err(db_err)?.map_or(0, |g| g.value());
                sizes
                    .insert(tenant, held.saturating_sub(*len))
                    .map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
        Ok(gone.len())
    }

    /// A blob of `tenant`, if it uploaded one with this hash.
    pub fn blob(&self, tenant: &str, hash: &str) -> Result<Option<Vec<u8>>> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let t = tx.open_table(BLOBS).map_err(db_err)?;
        let v = t.get(blob_key(tenant, hash).as_str()).map_err(db_err)?;
        Ok(v.map(|g| g.value().to_vec()))
    }

    /// Whether `tenant` uploaded a blob with this hash.
    pub fn has_blob(&self, tenant: &str, hash: &str) -> Result<bool> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let t = tx.open_table(BLOBS).map_err(db_err)?;
        Ok(t.get(blob_key(tenant, hash).as_str())
            .map_err(db_err)?
            .is_some())
    }

    /// Stores a new job (its `id` is assigned here: one past the largest ever given) and
    /// returns it. Committed and synced when this returns.
    pub fn insert(&self, mut record: JobRecord) -> Result<JobRecord> {
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut t = tx.open_table(JOBS).map_err(db_err)?;
            let mut meta = tx.open_table(META).map_err(db_err)?;
            let last = t.last().map_err(db_err)?.map_or(0, |(k, _)| k.value());
            let next = meta
                .get("next-id")
                .map_err(db_err)?
                .map_or(1, |g| g.value());
            record.id = next.max(last + 1);
            meta.insert("next-id", record.id + 1).map_err(db_err)?;
            t.insert(record.id, to_json(&record)?.as_slice())
                .map_err(db_err)?;
            // The blobs it names are renewed: a sweep keeps them while it is kept, and for
            // the retention after.
            let blobs = tx.open_table(BLOBS).map_err(db_err)?;
            let mut times = tx.open_table(BLOB_TIMES).map_err(db_err)?;
            for hash in std::iter::once(&record.component).chain(record.inputs.values()) {
                let key = blob_key(&record.tenant, hash);
                if blobs.get(key.as_str()).map_err(db_err)?.is_some() {
                    times
                        .insert(key.as_str(), record.submitted_ms)
                        .map_err(db_err)?;
                }
            }
        }
        tx.commit().map_err(db_err)?;
        Ok(record)
    }

    /// Replaces a job's record, and its logs where given, in one commit.
    pub fn put(&self, record: &JobRecord, logs: Option<&JobLogs>) -> Result<()> {
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut t = tx.open_table(JOBS).map_err(db_err)?;
            t.insert(record.id, to_json(record)?.as_slice())
                .map_err(db_err)?;
            if let Some(logs) = logs {
                let mut l = tx.open_table(LOGS).map_err(db_err)?;
                l.insert(record.id, to_json(logs)?.as_slice())
                    .map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
        Ok(())
    }

    /// Job `id`'s record.
    pub fn get(&self, id: u64) -> Result<Option<JobRecord>> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let t = tx.open_table(JOBS).map_err(db_err)?;
        let v = t.get(id).map_err(db_err)?;
        v.map(|g| from_json(g.value())).transpose()
    }

    /// Job `id`'s logs (empty until it finished).
    pub fn logs(&self, id: u64) -> Result<JobLogs> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let t = tx.open_table(LOGS).map_err(db_err)?;
        let v = t.get(id).map_err(db_err)?;
        Ok(v.map(|g| from_json(g.value()))
            .transpose()?
            .unwrap_or_default())
    }

    /// Deletes jobs `ids`: their records and logs in one commit, then their directories.
    /// An id with no record is skipped.
    pub fn remove(&self, ids: &[u64]) -> Result<()> {
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut t = tx.open_table(JOBS).map_err(db_err)?;
            let mut l = tx.open_table(LOGS).map_err(db_err)?;
            for &id in ids {
                t.remove(id).map_err(db_err)?;
                l.remove(id).map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
        for &id in ids {
            let dir = self.job_dir(id);
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing {}", dir.display()), e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every job's record, by id.
    pub fn all(&self) -> Result<Vec<JobRecord>> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let t = tx.open_table(JOBS).map_err(db_err)?;
        let mut out = Vec::new();
        for entry in t.iter().map_err(db_err)? {
            let (_, v) = entry.map_err(db_err)?;
            out.push(from_json(v.value())?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tenant: &str) -> JobRecord {
        JobRecord::queued(
            tenant.into(),
            "app".into(),
            "c".into(),
            vec!["1".into()],
            BTreeMap::new(),
            1,
        )
    }

    #[test]
    fn records_and_blobs_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("weft-records-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (a, b, hash);
        {
            let db = JobDb::open(&dir).expect("open");
            a = db.insert(record("alice")).expect("insert");
            b = db.insert(record("bob")).expect("insert");
            hash = match db
                .put_blob("alice", b"component bytes", 20, 1)
                .expect("blob")
            {
                Stored::Blob(h) => h,
                other => panic!("{other:?}"),
            };
            // The same bytes again cost nothing; others past the quota of 20 are refused.
            assert_eq!(
                db.put_blob("alice", b"component bytes", 20, 1)
                    .expect("blob"),
                Stored::Blob(hash.clone())
            );
            assert_eq!(
                db.put_blob("alice", b"more bytes", 20, 1).expect("blob"),
                Stored::OverQuota { held: 15 }
            );
            let mut done = b.clone();
            done.state = JobState::Succeeded;
            let logs = JobLogs {
                stdout: "4.5\n".into(),
                ..JobLogs::default()
            };
            db.put(&done, Some(&logs)).expect("put");
        }
        let db = JobDb::open(&dir).expect("reopen");
        assert_eq!((a.id, b.id), (1, 2));
        assert_eq!(db.get(1).expect("get"), Some(a));
        assert_eq!(
            db.get(2).expect("get").map(|r| r.state),
            Some(JobState::Succeeded)
        );
        assert_eq!(db.logs(2).expect("logs").stdout, "4.5\n");
        assert_eq!(db.logs(1).expect("logs"), JobLogs::default());
        assert_eq!(
            db.blob("alice", &hash).expect("blob").as_deref(),
            Some(&b"component bytes"[..])
        );
        // Blobs are per tenant.
        assert!(!db.has_blob("bob", &hash).expect("has"));
        assert_eq!(db.all().expect("all").len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn blobs_no_job_names_are_swept_once_old_and_their_bytes_freed() {
        let dir = std::env::temp_dir().join(format!("weft-blob-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = JobDb::open(&dir).expect("open");
        let put = |bytes: &[u8], at: u64| match db.put_blob("alice", bytes, 30, at).expect("blob") {
            Stored::Blob(h) => h,
            other => panic!("{other:?}"),
        };
        let named = put(b"named by a job", 10);
        let old = put(b"old", 10);
        let new = put(b"new", 200);
        let renewed = put(b"renewed", 10);
        assert_eq!(put(b"renewed", 300), renewed, "the same bytes again");
        // A job accepted at 1 names `named`: its time becomes 1, old, but a job names it.
        let mut job = record("alice");
        job.component = named.clone();
        db.insert(job).expect("insert");
        // Bob's blob of the same bytes is Bob's, and old: swept by itself.
        assert!(matches!(
            db.put_blob("bob", b"old", 30, 10).expect("blob"),
            Stored::Blob(_)
        ));
        assert_eq!(db.sweep_blobs(100).expect("sweep"), 2);
        assert!(db.has_blob("alice", &named).expect("has"));
        assert!(!db.has_blob("alice", &old).expect("has"));
        assert!(!db.has_blob("bob", &old).expect("has"));
        assert!(db.has_blob("alice", &new).expect("has"));
        assert!(db.has_blob("alice", &renewed).expect("has"));
        // Alice's bytes went down by the 3 of `old` to 14 + 3 + 7 = 24 of 30: 6 more fit.
        assert!(matches!(
            db.put_blob("alice", b"sixsix", 30, 400).expect("blob"),
            Stored::Blob(_)
        ));
        assert_eq!(
            db.put_blob("alice", b"x", 30, 400).expect("blob"),
            Stored::OverQuota { held: 30 }
        );
        // Once no job names it, a named blob goes too.
        db.remove(&[1]).expect("remove");
        assert_eq!(db.sweep_blobs(100).expect("sweep"), 1);
        assert!(!db.has_blob("alice", &named).expect("has"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn removed_jobs_lose_record_logs_and_files_and_their_ids_are_not_given_again() {
        let dir = std::env::temp_dir().join(format!("weft-remove-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = JobDb::open(&dir).expect("open");
        let a = db.insert(record("alice")).expect("insert");
        let b = db.insert(record("alice")).expect("insert");
        db.put(
            &b,
            Some(&JobLogs {
                stdout: "out".into(),
                ..JobLogs::default()
            }),
        )
        .expect("put");
        std::fs::create_dir_all(db.job_dir(b.id)).expect("job dir");
        std::fs::write(db.job_dir(b.id).join("x.f64"), [0u8; 8]).expect("file");
        db.remove(&[b.id, 99]).expect("remove");
        assert_eq!(db.get(b.id).expect("get"), None);
        assert_eq!(db.logs(b.id).expect("logs"), JobLogs::default());
        assert!(!db.job_dir(b.id).exists());
        assert_eq!(db.get(a.id).expect("get"), Some(a.clone()));
        // The newest id was deleted; the next job still gets a new one, after a reopen too.
        drop(db);
        let db = JobDb::open(&dir).expect("reopen");
        let c = db.insert(record("alice")).expect("insert");
        assert_eq!(c.id, b.id + 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
