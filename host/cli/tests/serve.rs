//! `weft serve` as a process on 127.0.0.1, driven by the service's HTTP client: component
//! jobs give the native bits, tenants are kept apart, hostile jobs fail alone, full queues
//! answer 429, cancels stop jobs, a load of 8 tenants and 400 jobs all finish right, and
//! neither `kill -9` nor SIGTERM loses an accepted job.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use weft::{Config, Numeric, Runtime};
use weft_plugin_artifacts as artifacts;
use weft_service::Client;
use weft_service::records::{JobRecord, JobState};

/// Long enough for any job of these tests on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(300);

/// A `weft serve` process, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
    /// The first line it printed.
    started: serde_json::Value,
}

impl Serve {
    /// Starts a server with `tenants` (TOML `[[tenant]]` tables) and `service` settings
    /// (lines of its `[service]` table) on `dir`.
    fn start(dir: &Path, service: &str, tenants: &str) -> Serve {
        Serve::start_with(dir, service, tenants, None)
    }

    /// As [`Serve::start`], on `ranks` ranks of `mpirun` where given.
    fn start_with(dir: &Path, service: &str, tenants: &str, ranks: Option<usize>) -> Serve {
        std::fs::create_dir_all(dir).expect("dir");
        let config = dir.join("weft.toml");
        std::fs::write(
            &config,
            format!(
                "[service]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"data\"\n{service}\n{tenants}"
            ),
        )
        .expect("config");
        let weft = env!("CARGO_BIN_EXE_weft");
        let mut command = match ranks {
            Some(n) => {
                let mut c = Command::new("mpirun");
                c.args(["--oversubscribe", "-n", &n.to_string(), weft])
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
                c
            }
            None => Command::new(weft),
        };
        let mut child = command
            .args(["serve", "--config"])
            .arg(&config)
            .env("WEFT_EXPLAIN", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("weft serve starts");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("its first line");
        let started: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        let addr = started["listening"]
            .as_str()
            .expect("an address")
            .to_string();
        Serve {
            child,
            addr,
            started,
        }
    }

    fn client(&self, token: &str) -> Client {
        Client::new(&format!("http://{}", self.addr), token).expect("client")
    }

    /// `kill -9`.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM to the service's process (rank 0's, under `mpirun`), and the exit status
    /// of the process started (`mpirun`'s, under it).
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.started["pid"].as_u64().expect("its pid").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM");
        self.child.wait().expect("it exits")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fresh_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A `[[tenant]]` table.
fn tenant(name: &str, extra: &str) -> String {
    format!(
        "[[tenant]]\nname = \"{name}\"\ntoken = \"{}\"\n{extra}\n",
        token(name)
    )
}

fn token(name: &str) -> String {
    format!("{name}-token-0123456789")
}

/// What `tiny_add` prints, from a plain loop: the sum of `0..8` plus `0.5` each.
fn tiny_sum() -> String {
    let total: f64 = (0..8).map(|i| f64::from(i) + 0.5).sum();
    format!("{total}\n")
}

/// Uploads `bytes` and submits `count` jobs of them; the ids accepted.
fn submit_many(c: &Client, bytes: &[u8], name: &str, args: &[&str], count: usize) -> Vec<u64> {
    let blob = c.upload(bytes.to_vec()).expect("upload");
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    (0..count)
        .map(|_| {
            let r = c
                .submit_uploaded(&blob, name, &args, &BTreeMap::new())
                .expect("submit");
            r.json::<JobRecord>().expect("accepted").id
        })
        .collect()
}

/// Hostile applications that stop at the same point wherever they run (on every rank
/// alike), each with what its failure says: a memory bomb, an output flood (cut at its 4096
/// bytes, its write fails and it exits with status 1) and a forged handle.
const HOSTILE_ALIKE: [(&str, &[u8], &str); 3] = [
    (
        "hostile_memory",
        artifacts::APP_HOSTILE_MEMORY,
        "the cap is 33554432 bytes",
    ),
    (
        "hostile_output",
        artifacts::APP_HOSTILE_OUTPUT,
        "None Some(1)",
    ),
    (
        "hostile_handle",
        artifacts::APP_HOSTILE_HANDLE,
        "unknown handle",
    ),
];

/// Submits `count` Black-Scholes jobs (`examples/apps`' `black_scholes_app`) with `args`.
fn black_scholes(c: &Client, args: &[&str], count: usize) -> Vec<u64> {
    submit_many(
        c,
        artifacts::APP_BLACK_SCHOLES_APP,
        "black_scholes_app",
        args,
        count,
    )
}

#[test]
fn a_component_job_gives_the_native_bits_with_its_events_logs_and_files() {
    let dir = fresh_dir("bits");
    let s = Serve::start(&dir, "workers = 2", &tenant("alice", ""));
    gives_the_native_bits(&s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Black-Scholes through the service writes the native model's bytes, with the same tasks
/// submitted and run, its events, logs and files.
fn gives_the_native_bits(s: &Serve) {
    let c = s.client(&token("alice"));
    let (n, seed) = (10_000u64, 7u64);
    let id = submit_many(
        &c,
        artifacts::APP_BLACK_SCHOLES_APP,
        "black_scholes_app",
        // `vectors`: the prices read back, as the native run below reads them.
        &[&n.to_string(), &seed.to_string(), "vectors"],
        1,
    )[0];
    let mut kinds = Vec::new();
    let mut explained = String::new();
    c.events(id, PATIENCE, |kind, data| {
        kinds.push(kind.to_string());
        if kind == "explain" {
            explained.push_str(data);
        }
    })
    .expect("events");
    let r = c.job(id).expect("record");
    assert_eq!(r.state, JobState::Succeeded, "{r:?}");
    assert_eq!(kinds.first().map(String::as_str), Some("state"));
    assert_eq!(kinds.last().map(String::as_str), Some("end"));
    assert!(kinds.iter().any(|k| k == "stdout"), "{kinds:?}");
    assert!(explained.contains("tasks"), "a fusion summary: {explained}");
    let logs = c.logs(id).expect("logs");
    assert!(logs.stdout.contains("\"example\":\"black_scholes_app\""));

    // The same program natively, on a runtime of this process.
    let np = Numeric::new(
        Runtime::new(Config::default()).expect("runtime"),
        artifacts::NUMERIC,
    )
    .expect("numeric");
    use weft_examples::black_scholes as bs;
    let (call, put) = bs::inputs(&np, n, seed).price(bs::Cnd::Erf);
    let bytes = |a: weft::Array| -> Vec<u8> {
        let v = a.to_vec().expect("values");
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    };
    let (call, put) = (bytes(call), bytes(put));
    let stats = np.runtime(|rt| rt.stats());
    assert_eq!(c.file(id, "call.f64").expect("call.f64"), call);
    assert_eq!(c.file(id, "put.f64").expect("put.f64"), put);
    assert_eq!(
        (r.stats.tasks_submitted, r.stats.tasks_executed),
        (stats.tasks_submitted, stats.exec.tasks_executed),
        "(tasks submitted, tasks run): service vs native"
    );
    assert!(
        r.stats.tasks_executed < r.stats.tasks_submitted,
        "fused: {r:?}"
    );
    // Its kernels' time, in its record and in the tenant's metrics (its only job).
    assert!(r.stats.kernel_us > 0, "{r:?}");
    let metrics = c.metrics().expect("metrics");
    let kernel_seconds: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("weft_kernel_seconds_total{tenant=\"alice\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("kernel seconds in\n{metrics}"));
    assert_eq!(kernel_seconds, r.stats.kernel_us as f64 / 1e6, "{metrics}");
    assert_eq!(r.outputs.get("call.f64"), Some(&(n * 8)));
    // A file it did not write, and names that leave its directory, are not found.
    for name in ["nothing.f64", "..", "..%2Fjobs.redb"] {
        assert!(c.file(id, name).is_err(), "{name}");
    }
}

#[test]
fn tokens_are_required_and_tenants_never_see_each_others_jobs() {
    let dir = fresh_dir("tenants");
    let s = Serve::start(
        &dir,
        "workers = 1",
        &format!("{}{}", tenant("alice", ""), tenant("bob", "")),
    );
    let alice = s.client(&token("alice"));
    let id = submit_many(&alice, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
    assert_eq!(
        alice.wait(id, PATIENCE).expect("ends").state,
        JobState::Succeeded
    );

    for bad in ["", "alice-token-012345678", "bob-token-0123456789x"] {
        let c = s.client(bad);
        for (method, path) in [
            ("GET", format!("/v1/jobs/{id}")),
            ("GET", "/v1/jobs".into()),
            ("POST", "/v1/blobs".into()),
        ] {
            let r = c.request(method, &path, Vec::new()).expect("answer");
            assert_eq!(r.status, 401, "{method} {path} with {bad:?}");
        }
    }
    let bob = s.client(&token("bob"));
    for (method, path) in [
        ("GET", format!("/v1/jobs/{id}")),
        ("GET", format!("/v1/jobs/{id}/events")),
        ("GET", format!("/v1/jobs/{id}/logs")),
        ("GET", format!("/v1/jobs/{id}/files/call.f64")),
        ("DELETE", format!("/v1/jobs/{id}")),
    ] {
        let r = bob.request(method, &path, Vec::new()).expect("answer");
        assert_eq!(r.status, 404, "bob: {method} {path}");
    }
    let listed: Vec<JobRecord> = bob
        .request("GET", "/v1/jobs", Vec::new())
        .expect("list")
        .json()
        .expect("json");
    assert!(listed.is_empty());
    // Alice's blob is not Bob's to run.
    let record = alice.job(id).expect("record");
    let r = bob
        .submit_uploaded(&record.component, "tiny_add", &[], &BTreeMap::new())
        .expect("answer");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        alice.job(id).expect("still hers").state,
        JobState::Succeeded
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uploads_past_a_tenants_quota_are_refused() {
    let dir = fresh_dir("uploads");
    let quota = artifacts::APP_TINY_ADD.len() + 1000;
    let s = Serve::start(
        &dir,
        "workers = 1",
        &tenant("alice", &format!("upload_bytes = {quota}")),
    );
    let c = s.client(&token("alice"));
    let first = c
        .upload(artifacts::APP_TINY_ADD.to_vec())
        .expect("under the quota");
    // The same bytes again cost nothing.
    assert_eq!(
        c.upload(artifacts::APP_TINY_ADD.to_vec()).expect("again"),
        first
    );
    let r = c
        .request("POST", "/v1/blobs", vec![7u8; 2000])
        .expect("answer");
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.server_message().contains("upload quota"), "{}", r.text());
    // What fits still does, and jobs still run.
    assert!(c.upload(vec![7u8; 1000]).is_ok());
    let id = submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
    assert_eq!(
        c.wait(id, PATIENCE).expect("ends").state,
        JobState::Succeeded
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_past_the_output_quota_fail_the_job_and_are_removed() {
    let dir = fresh_dir("files");
    // Black-Scholes on 10,000 options writes two files of 80,000 bytes: itself (`vectors`),
    // found when it ends (or by the check while it runs, every 100 ms; either fails it).
    let s = Serve::start(
        &dir,
        "workers = 1",
        &tenant("alice", "output_bytes = 100000"),
    );
    let c = s.client(&token("alice"));
    let id = black_scholes(&c, &["10000", "7", "vectors"], 1)[0];
    let r = c.wait(id, PATIENCE).expect("ends");
    assert_eq!(r.state, JobState::Failed, "{r:?}");
    let why = r.error.as_deref().unwrap_or_default();
    assert!(
        why.contains("160000 bytes") && why.contains("output quota of 100000"),
        "{why}"
    );
    assert!(r.outputs.is_empty(), "{r:?}");
    assert!(c.file(id, "call.f64").is_err());
    // Through the host (`tofile`): the second file is refused before it is written, and the
    // application fails with that error.
    let id = black_scholes(&c, &["10000", "7", "files"], 1)[0];
    let r = c.wait(id, PATIENCE).expect("ends");
    assert_eq!(r.state, JobState::Failed, "{r:?}");
    assert_eq!(r.exit_status, Some(1), "{r:?}");
    let logs = c.logs(id).expect("logs");
    assert!(
        logs.stderr
            .contains("would hold 160000 bytes, past its quota of 100000"),
        "{}",
        logs.stderr
    );
    assert_eq!(r.outputs.get("put.f64"), None, "{r:?}");
    // Under the quota, the same job keeps its files.
    let id = black_scholes(&c, &["5000", "7"], 1)[0];
    let r = c.wait(id, PATIENCE).expect("ends");
    assert_eq!(r.state, JobState::Succeeded, "{r:?}");
    assert_eq!(c.file(id, "call.f64").expect("kept").len(), 40_000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn finished_jobs_past_their_tenants_count_are_swept_with_their_files() {
    let dir = fresh_dir("retention");
    let s = Serve::start(
        &dir,
        "workers = 1\nsweep_s = 1",
        &tenant("alice", "retain_jobs = 2"),
    );
    let c = s.client(&token("alice"));
    let ids = black_scholes(&c, &["1000", "7"], 4);
    // One worker runs them in order; the first two may be swept before the last ends.
    assert_eq!(
        c.wait(ids[3], PATIENCE).expect("ends").state,
        JobState::Succeeded
    );
    let job_dir = |id: u64| dir.join("data").join("jobs").join(id.to_string());
    // A sweep a second: the two oldest go, records and files; the two newest stay.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while c.job(ids[1]).is_ok() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for &old in &ids[..2] {
        let r = c
            .request("GET", &format!("/v1/jobs/{old}"), Vec::new())
            .expect("answer");
        assert_eq!(r.status, 404, "job {old}: {}", r.text());
        assert!(c.file(old, "call.f64").is_err());
        assert!(!job_dir(old).exists(), "job {old}'s files");
    }
    for &new in &ids[2..] {
        assert_eq!(c.job(new).expect("kept").state, JobState::Succeeded);
        assert_eq!(c.file(new, "call.f64").expect("kept").len(), 8_000);
    }
    // A restart sweeps at once, and new jobs get new ids.
    drop(s);
    let s = Serve::start(&dir, "workers = 1", &tenant("alice", "retain_jobs = 1"));
    assert_eq!(s.started["swept"], 1, "{}", s.started);
    let c = s.client(&token("alice"));
    assert!(c.job(ids[2]).is_err());
    let next = submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
    assert_eq!(next, ids[3] + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uploads_no_job_names_are_swept_after_their_retention_and_free_their_quota() {
    let dir = fresh_dir("blob-retention");
    let s = Serve::start(
        &dir,
        "sweep_s = 1\nretain_s = 2",
        &tenant("alice", "upload_bytes = 1500"),
    );
    let c = s.client(&token("alice"));
    let first = c.upload(vec![1u8; 1000]).expect("upload");
    // A second upload would pass the quota of 1500 bytes, until the first (no job names it)
    // is swept, 2 s after it was uploaded.
    let second = vec![2u8; 1000];
    let r = c
        .request("POST", "/v1/blobs", second.clone())
        .expect("answer");
    assert_eq!(r.status, 413, "{}", r.text());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut stored = None;
    while stored.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        stored = c.upload(second.clone()).ok();
    }
    assert!(stored.is_some(), "the first upload was never swept");
    let r = c
        .submit_uploaded(&first, "app", &[], &BTreeMap::new())
        .expect("answer");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.server_message().contains(&first), "{}", r.text());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_jobs_fail_alone_while_another_tenant_finishes() {
    let dir = fresh_dir("hostile");
    let s = Serve::start(
        &dir,
        "workers = 2",
        &format!(
            "{}{}",
            tenant("alice", "max_running = 1"),
            tenant(
                "mallory",
                "max_running = 1\ntime_limit_s = 2\nmemory_mb = 32\noutput_bytes = 4096"
            )
        ),
    );
    let mallory = s.client(&token("mallory"));
    let mut hostile: Vec<(&str, &[u8], &str)> = vec![
        ("hostile_spin", artifacts::APP_HOSTILE_SPIN, "time limit"),
        ("hostile_tasks", artifacts::APP_HOSTILE_TASKS, "time limit"),
    ];
    hostile.extend(HOSTILE_ALIKE);
    let ids: Vec<u64> = hostile
        .iter()
        .map(|(name, bytes, _)| submit_many(&mallory, bytes, name, &[], 1)[0])
        .collect();
    // Alice's tiny jobs all finish while Mallory's first job still spins.
    let alice = s.client(&token("alice"));
    let tiny = submit_many(&alice, artifacts::APP_TINY_ADD, "tiny_add", &[], 5);
    let mut alice_done = 0;
    for id in tiny {
        let r = alice.wait(id, PATIENCE).expect("ends");
        assert_eq!(r.state, JobState::Succeeded, "{r:?}");
        assert_eq!(alice.logs(id).expect("logs").stdout, tiny_sum());
        alice_done = alice_done.max(r.finished_ms.expect("finished"));
    }
    for ((name, _, expect), id) in hostile.iter().zip(&ids) {
        let r = mallory.wait(*id, PATIENCE).expect("ends");
        assert_eq!(r.state, JobState::Failed, "{name}: {r:?}");
        let why = format!("{:?} {:?}", r.error, r.exit_status);
        assert!(why.contains(expect), "{name}: {why}");
        if *name == "hostile_spin" {
            assert!(
                alice_done < r.finished_ms.expect("finished"),
                "alice's jobs finished before mallory's spin was stopped"
            );
        }
    }
    // The service is still whole for both.
    let after = submit_many(&mallory, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
    assert_eq!(
        mallory.wait(after, PATIENCE).expect("ends").state,
        JobState::Succeeded
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn standard_output_is_streamed_while_the_job_runs() {
    let dir = fresh_dir("stream");
    let s = Serve::start(
        &dir,
        "workers = 1",
        &tenant("alice", "output_bytes = 100000\ntime_limit_s = 30"),
    );
    let c = s.client(&token("alice"));
    let id = submit_many(&c, artifacts::APP_HOSTILE_OUTPUT, "hostile_output", &[], 1)[0];
    let (mut streamed, mut order) = (String::new(), Vec::new());
    c.events(id, PATIENCE, |kind, data| {
        order.push(kind.to_string());
        if kind == "stdout" {
            let text: String = serde_json::from_str(data).expect("a JSON string");
            streamed.push_str(&text);
        }
    })
    .expect("events");
    // Its output came in many events, all before the state that ended it.
    let last_state = order.iter().rposition(|k| k == "state").expect("states");
    let first_output = order.iter().position(|k| k == "stdout").expect("output");
    assert!(first_output < last_state, "{order:?}");
    assert!(order.iter().filter(|k| *k == "stdout").count() > 1);
    assert_eq!(streamed.len(), 100_000);
    assert_eq!(c.logs(id).expect("logs").stdout, streamed);
    // Read again once it ended, the stream gives the whole output in one event.
    let mut again = Vec::new();
    c.events(id, PATIENCE, |kind, _| again.push(kind.to_string()))
        .expect("events");
    assert_eq!(
        again.iter().filter(|k| *k == "stdout").count(),
        1,
        "{again:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_queue_answers_429_and_cancels_stop_queued_and_running_jobs() {
    let dir = fresh_dir("queue");
    let s = Serve::start(
        &dir,
        "workers = 1",
        // A time limit far past the test's cancel, short enough that a job the cancel
        // missed ends (failed, at its limit) rather than hanging the test.
        &tenant(
            "alice",
            "max_running = 1\nmax_queued = 2\ntime_limit_s = 30",
        ),
    );
    let c = s.client(&token("alice"));
    let spin = submit_many(&c, artifacts::APP_HOSTILE_SPIN, "hostile_spin", &[], 1)[0];
    // Wait until it runs, so the queue holds only what follows.
    while c.job(spin).expect("record").state == JobState::Queued {
        std::thread::sleep(Duration::from_millis(5));
    }
    let queued = submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 2);
    let blob = c.upload(artifacts::APP_TINY_ADD.to_vec()).expect("upload");
    let full = c
        .submit_uploaded(&blob, "tiny_add", &[], &BTreeMap::new())
        .expect("answer");
    assert_eq!(full.status, 429, "{}", full.text());
    assert_eq!(full.header("retry-after"), Some("1"));
    assert!(full.server_message().contains("2 jobs queued"));

    let r = c.cancel(queued[0]).expect("cancel");
    assert_eq!(r.state, JobState::Cancelled);
    let r = c.cancel(spin).expect("cancel");
    assert_eq!(
        r.state,
        JobState::Running,
        "taken; it stops at its next check"
    );
    let r = c.wait(spin, PATIENCE).expect("ends");
    assert_eq!(r.state, JobState::Cancelled, "{r:?}");
    assert!(r.error.as_deref().is_some_and(|e| e.contains("cancelled")));
    let r = c.wait(queued[1], PATIENCE).expect("ends");
    assert_eq!(r.state, JobState::Succeeded);
    assert_eq!(c.job(queued[0]).expect("record").state, JobState::Cancelled);
    let metrics = c.metrics().expect("metrics");
    for line in [
        "weft_jobs{tenant=\"alice\",state=\"cancelled\"} 2",
        "weft_jobs{tenant=\"alice\",state=\"succeeded\"} 1",
        "weft_tasks_submitted_total{tenant=\"alice\"} 4",
        "weft_tasks_executed_total{tenant=\"alice\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

const LOAD_TENANTS: usize = 8;
const LOAD_JOBS: usize = 50;

fn load_tenants() -> String {
    (0..LOAD_TENANTS)
        .map(|t| {
            tenant(
                &format!("t{t}"),
                &format!("weight = {}\nmax_running = 2", 1 + t % 3),
            )
        })
        .collect()
}

/// Every tenant submits `LOAD_JOBS` tiny jobs at once, each from its own thread; the ids
/// each had accepted (until the server went away, if it did).
fn submit_load(addr: &str) -> Vec<(usize, Vec<u64>)> {
    let threads: Vec<_> = (0..LOAD_TENANTS)
        .map(|t| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let c = Client::new(&format!("http://{addr}"), &token(&format!("t{t}")))
                    .expect("client");
                let mut ids = Vec::new();
                let Ok(blob) = c.upload(artifacts::APP_TINY_ADD.to_vec()) else {
                    return (t, ids);
                };
                for _ in 0..LOAD_JOBS {
                    match c.submit_uploaded(&blob, "tiny_add", &[], &BTreeMap::new()) {
                        Ok(r) if r.status == 202 => {
                            ids.push(r.json::<JobRecord>().expect("record").id)
                        }
                        Ok(r) => panic!("tenant t{t}: {} {}", r.status, r.text()),
                        Err(_) => break, // the server was killed
                    }
                }
                (t, ids)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|h| h.join().expect("submitter"))
        .collect()
}

#[test]
fn eight_tenants_submitting_400_jobs_at_once_all_get_the_right_output() {
    let dir = fresh_dir("load");
    let s = Serve::start(&dir, "workers = 2", &load_tenants());
    let accepted = submit_load(&s.addr);
    let mut total = 0;
    for (t, ids) in accepted {
        assert_eq!(ids.len(), LOAD_JOBS, "tenant t{t}");
        let c = s.client(&token(&format!("t{t}")));
        for id in ids {
            let r = c.wait(id, PATIENCE).expect("ends");
            assert_eq!(r.state, JobState::Succeeded, "{r:?}");
            assert_eq!(c.logs(id).expect("logs").stdout, tiny_sum(), "job {id}");
            total += 1;
        }
    }
    assert_eq!(total, LOAD_TENANTS * LOAD_JOBS);
    let metrics = s.client(&token("t0")).metrics().expect("metrics");
    for t in 0..LOAD_TENANTS {
        let line = format!("weft_jobs{{tenant=\"t{t}\",state=\"succeeded\"}} {LOAD_JOBS}");
        assert!(metrics.lines().any(|l| l == line), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// After a restart, every job in `accepted` is there, finished: succeeded with the right
/// output, or failed because the server restarted while it ran.
fn none_lost(s: &Serve, accepted: &[(usize, Vec<u64>)]) -> (usize, usize) {
    let (mut succeeded, mut restarted) = (0, 0);
    for (t, ids) in accepted {
        let c = s.client(&token(&format!("t{t}")));
        for &id in ids {
            let r = c
                .wait(id, PATIENCE)
                .unwrap_or_else(|e| panic!("job {id} of t{t}: {e}"));
            match r.state {
                JobState::Succeeded => {
                    assert_eq!(c.logs(id).expect("logs").stdout, tiny_sum(), "job {id}");
                    succeeded += 1;
                }
                JobState::Failed => {
                    assert_eq!(
                        r.error.as_deref(),
                        Some("failed: server restarted"),
                        "{r:?}"
                    );
                    restarted += 1;
                }
                other => panic!("job {id}: {other:?}"),
            }
        }
    }
    (succeeded, restarted)
}

#[test]
fn kill_9_during_a_load_loses_no_accepted_job() {
    let dir = fresh_dir("crash");
    let s = Serve::start(&dir, "workers = 2", &load_tenants());
    let addr = s.addr.clone();
    let submitter = std::thread::spawn(move || submit_load(&addr));
    // Kill it once a good part of the load is in.
    let watcher = s.client(&token("t0"));
    loop {
        let listed: Vec<JobRecord> = watcher
            .request("GET", "/v1/jobs", Vec::new())
            .expect("list")
            .json()
            .expect("json");
        if listed.len() >= LOAD_JOBS / 2 || submitter.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    s.kill();
    let accepted = submitter.join().expect("submitters");
    let n: usize = accepted.iter().map(|(_, ids)| ids.len()).sum();
    assert!(n > 0);
    let s = Serve::start(&dir, "workers = 2", &load_tenants());
    let (succeeded, restarted) = none_lost(&s, &accepted);
    assert_eq!(succeeded + restarted, n);
    eprintln!(
        "accepted {n}: {succeeded} succeeded, {restarted} failed by the restart; {}",
        s.started
    );
    assert!(
        s.started["failed_by_restart"].as_u64() == Some(restarted as u64),
        "{} against {restarted}",
        s.started
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_finishes_running_jobs_and_a_restart_runs_the_queued_ones() {
    let dir = fresh_dir("term");
    let tenants = tenant("alice", "max_running = 1\ntime_limit_s = 2");
    let s = Serve::start(&dir, "workers = 1", &tenants);
    let c = s.client(&token("alice"));
    let spin = submit_many(&c, artifacts::APP_HOSTILE_SPIN, "hostile_spin", &[], 1)[0];
    while c.job(spin).expect("record").state == JobState::Queued {
        std::thread::sleep(Duration::from_millis(5));
    }
    let queued = submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 3);
    let status = s.terminate();
    assert!(status.success(), "{status:?}");
    let s = Serve::start(&dir, "workers = 1", &tenants);
    assert_eq!(s.started["requeued"], 3, "{}", s.started);
    assert_eq!(s.started["failed_by_restart"], 0, "{}", s.started);
    let c = s.client(&token("alice"));
    let r = c.job(spin).expect("record");
    assert_eq!(
        r.state,
        JobState::Failed,
        "stopped at its time limit before the exit"
    );
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("time limit")),
        "{r:?}"
    );
    for id in queued {
        assert_eq!(
            c.wait(id, PATIENCE).expect("ends").state,
            JobState::Succeeded
        );
        assert_eq!(c.logs(id).expect("logs").stdout, tiny_sum());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The service under `mpirun -n 2`: rank 0 serves, both ranks run every job.
#[cfg(feature = "mpi")]
mod on_ranks {
    use super::*;

    #[test]
    fn the_service_on_two_ranks_gives_one_processs_bits_and_rank_0_stops_them_all() {
        let dir = fresh_dir("ranks");
        let tenants = format!(
            "{}{}{}{}",
            tenant("alice", ""),
            tenant("bob", ""),
            tenant(
                "carol",
                "time_limit_s = 10\nmemory_mb = 32\noutput_bytes = 4096"
            ),
            tenant("dave", "time_limit_s = 2"),
        );
        let s = Serve::start_with(&dir, "", &tenants, Some(2));
        assert_eq!(s.started["ranks"], 2, "{}", s.started);
        gives_the_native_bits(&s);
        // Two tenants' tiny jobs, one after another through the one worker.
        for name in ["alice", "bob"] {
            let c = s.client(&token(name));
            for id in submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 3) {
                assert_eq!(
                    c.wait(id, PATIENCE).expect("ends").state,
                    JobState::Succeeded
                );
                assert_eq!(c.logs(id).expect("logs").stdout, tiny_sum());
            }
        }
        // A running job is cancelled on ranks: rank 0's part stops and tells rank 1, whose
        // application stops at its next check; both are ready for the next job.
        let c = s.client(&token("carol"));
        let spin = submit_many(&c, artifacts::APP_HOSTILE_SPIN, "hostile_spin", &[], 1)[0];
        let deadline = std::time::Instant::now() + PATIENCE;
        while c.job(spin).expect("record").state == JobState::Queued
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = c
            .request("DELETE", &format!("/v1/jobs/{spin}"), Vec::new())
            .expect("answer");
        assert!(r.status == 202 || r.status == 200, "{}", r.text());
        let r = c.wait(spin, PATIENCE).expect("ends");
        assert_eq!(r.state, JobState::Cancelled, "{r:?}");
        // Well before its 10 s time limit.
        let ran = r.finished_ms.unwrap_or(0) - r.started_ms.unwrap_or(0);
        assert!(ran < 8000, "it ran {ran} ms: {r:?}");
        let last = tiny_on_ranks(&c);
        // A job whose part fails on rank 1 alone (its scratch directory cannot be made, a
        // file is in the way): rank 0, waiting for rank 1 in the job's first exchange, is
        // told, and the job fails naming rank 1.
        let next = last + 1;
        let scratch = dir.join("data").join("rank-1");
        std::fs::create_dir_all(&scratch).expect("scratch");
        std::fs::write(scratch.join(next.to_string()), b"in the way").expect("blocker");
        let id = submit_many(&c, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
        assert_eq!(id, next, "ids are given in order");
        let r = c.wait(id, PATIENCE).expect("ends");
        assert_eq!(r.state, JobState::Failed, "{r:?}");
        let why = r.error.clone().unwrap_or_default();
        assert!(
            why.contains("rank 1") && why.contains("its directory"),
            "{r:?}"
        );
        std::fs::remove_file(scratch.join(next.to_string())).expect("blocker");
        tiny_on_ranks(&c);
        // A flood of tiny tasks, each rank past its time limit at its own point (one in its
        // application, the other maybe waiting in a gather for it).
        let dave = s.client(&token("dave"));
        let flood = submit_many(&dave, artifacts::APP_HOSTILE_TASKS, "hostile_tasks", &[], 1)[0];
        let r = dave.wait(flood, PATIENCE).expect("ends");
        assert_eq!(r.state, JobState::Failed, "{r:?}");
        assert!(
            r.error
                .as_deref()
                .unwrap_or_default()
                .contains("time limit"),
            "{r:?}"
        );
        tiny_on_ranks(&dave);
        // Hostile jobs that stop at the same point on every rank (no collective between):
        // each fails with its error, and the ranks stay together for the next job.
        for (name, bytes, expect) in HOSTILE_ALIKE {
            let id = submit_many(&c, bytes, name, &[], 1)[0];
            let r = c.wait(id, PATIENCE).expect("ends");
            assert_eq!(r.state, JobState::Failed, "{name}: {r:?}");
            let why = format!("{:?} {:?}", r.error, r.exit_status);
            assert!(why.contains(expect), "{name}: {why}");
        }
        tiny_on_ranks(&c);
        // SIGTERM to rank 0: it drains, tells rank 1 to stop, and `mpirun` exits cleanly.
        let status = s.terminate();
        assert!(status.success(), "{status:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A tiny job of `c`'s tenant on the ranks succeeds with the right sum; its id.
    fn tiny_on_ranks(c: &Client) -> u64 {
        let tiny = submit_many(c, artifacts::APP_TINY_ADD, "tiny_add", &[], 1)[0];
        assert_eq!(
            c.wait(tiny, PATIENCE).expect("ends").state,
            JobState::Succeeded
        );
        assert_eq!(c.logs(tiny).expect("logs").stdout, tiny_sum());
        tiny
    }
}
