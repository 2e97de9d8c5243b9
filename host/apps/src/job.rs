//! One application job: an application component run once on a runtime, with its
//! arguments, environment, directory and limits, to an exit status and its output.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use send_wrapper::SendWrapper;
use wasmtime::component::{Component, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::sync::Command;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};
use weft::{CancelToken, Runtime};
use weft_plugin::limits::Limiter;
use weft_plugin::ticker::EpochTicker;
use weft_runtime::PluginId;

use crate::linking::{AppState, linker_for, served_interfaces, unserved};
use crate::output::{LiveOutput, OutputSink, Stream};
use crate::{Error, Result};

/// What one application job may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppLimits {
    /// The most linear memory the application's instance may hold, in bytes.
    pub memory_bytes: usize,
    /// The longest the application may run (its own code: the epoch deadline; the kernels
    /// its reads run are bounded by the runtime's `kernel_time`).
    pub time: Duration,
    /// The most bytes it may write to standard output and to standard error, each (a write
    /// past it fails, and the application stops with that error). Only where the job
    /// captures its output ([`Job::capture`]).
    pub output_bytes: usize,
    /// The most bytes the files of its directory ([`Job::dir`], subdirectories included)
    /// may hold together (`None`: unbounded). Looked at every [`DIR_CHECK_TICKS`] epoch
    /// ticks while its own code runs (so it may pass the bound by what it writes in that
    /// time), and before the host writes a file for it (`files.write-store`, refused past
    /// it); past it, the application is stopped with that error.
    pub dir_bytes: Option<u64>,
}

/// How often, in epoch ticks (milliseconds), a running application's directory is measured
/// against [`AppLimits::dir_bytes`].
pub const DIR_CHECK_TICKS: u64 = 100;

impl Default for AppLimits {
    fn default() -> Self {
        AppLimits {
            memory_bytes: 256 << 20,
            time: Duration::from_secs(600),
            output_bytes: 1 << 20,
            dir_bytes: None,
        }
    }
}

/// The bytes the files under `dir` hold (a symbolic link counts as itself; what cannot be
/// read counts as nothing).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.path().symlink_metadata() {
                Ok(m) if m.is_dir() => pending.push(e.path()),
                Ok(m) => total = total.saturating_add(m.len()),
                Err(_) => {}
            }
        }
    }
    total
}

/// One run of an application.
#[derive(Clone, Debug, Default)]
pub struct Job {
    /// The name errors give the application.
    pub name: String,
    /// Its arguments, without the program name (the host passes `name` as `argv[0]`).
    pub args: Vec<String>,
    /// Its environment variables.
    pub env: Vec<(String, String)>,
    /// A directory of the host it may read and write, as its working directory (`.`).
    pub dir: Option<PathBuf>,
    /// Whether its standard output and error are captured (into [`JobOutcome`]) rather
    /// than written to the host's.
    pub capture: bool,
    /// Its limits.
    pub limits: AppLimits,
    /// Where each write to standard output and error also goes as it happens, when the
    /// job captures them (a service streams them with it).
    pub output: Option<OutputSink>,
    /// Cancelled from another thread to stop the job: the application stops within an
    /// epoch tick (a millisecond) of its own code running, and a kernel it has running at
    /// its next cancel check, with [`Error::Failed`] saying it was cancelled.
    pub cancel: Option<Arc<CancelToken>>,
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobOutcome {
    /// The exit status: 0 when `main` returned, or what `std::process::exit` gave.
    pub status: i32,
    /// Its standard output, when captured.
    pub stdout: Vec<u8>,
    /// Its standard error, when captured.
    pub stderr: Vec<u8>,
    /// The plugin calls it made that entered the plugin.
    pub calls_made: u64,
    /// The plugin calls it made that the host replayed from a recording, without entering
    /// the plugin.
    pub calls_replayed: u64,
}

/// Compiles and runs application components. One host serves any number of jobs, one at a
/// time per runtime.
pub struct AppHost {
    engine: Engine,
    _ticker: EpochTicker,
}

impl AppHost {
    /// A host with its own engine, whose epoch advances every
    /// [`weft_plugin::ticker::EPOCH_TICK`].
    pub fn new() -> Result<AppHost> {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| Error::Host(format!("engine: {e}")))?;
        let ticker = EpochTicker::start(engine.clone())
            .map_err(|e| Error::Host(format!("epoch thread: {e}")))?;
        Ok(AppHost {
            engine,
            _ticker: ticker,
        })
    }

    /// Compiles an application component (`name` for errors).
    pub fn compile(&self, name: &str, bytes: &[u8]) -> Result<Component> {
        Component::new(&self.engine, bytes).map_err(|e| Error::Load {
            app: name.into(),
            message: format!("not a component this host can run: {e:#}"),
        })
    }

    /// Runs `component` as `job` on `rt`, whose loaded `plugins` serve its imports. The
    /// runtime comes back with the outcome whatever happened: the application's store
    /// handles are released (their stores freed once no task needs them) before it does.
    pub fn run(
        &self,
        rt: Runtime,
        plugins: &[PluginId],
        component: &Component,
        job: &Job,
    ) -> (Result<JobOutcome>, Runtime) {
        let (outcome, mut rt) = self.run_cancellable(rt, plugins, component, job);
        rt.set_cancel(None);
        (outcome, rt)
    }

    /// [`AppHost::run`], with the job's cancel request given to the runtime first.
    fn run_cancellable(
        &self,
        mut rt: Runtime,
        plugins: &[PluginId],
        component: &Component,
        job: &Job,
    ) -> (Result<JobOutcome>, Runtime) {
        rt.set_cancel(job.cancel.clone());
        let fail = |message: String| Error::Failed {
            app: job.name.clone(),
            message,
        };
        let served = match served_interfaces(&rt, plugins) {
            Ok(s) => s,
            Err(e) => return (Err(fail(format!("listing the plugins' exports: {e}"))), rt),
        };
        let missing = unserved(&self.engine, component, &served);
        if !missing.is_empty() {
            return (
                Err(Error::Load {
                    app: job.name.clone(),
                    message: format!(
                        "it imports {}, which no loaded plugin exports",
                        missing.join(", ")
                    ),
                }),
                rt,
            );
        }
        let (stdout, stderr) = (
            MemoryOutputPipe::new(job.limits.output_bytes),
            MemoryOutputPipe::new(job.limits.output_bytes),
        );
        let mut wasi = WasiCtxBuilder::new();
        let mut argv = vec![job.name.clone()];
        argv.extend(job.args.iter().cloned());
        wasi.args(&argv).envs(&job.env);
        if job.capture {
            match &job.output {
                Some(sink) => wasi
                    .stdout(LiveOutput::new(
                        stdout.clone(),
                        Stream::Stdout,
                        sink.clone(),
                    ))
                    .stderr(LiveOutput::new(
                        stderr.clone(),
                        Stream::Stderr,
                        sink.clone(),
                    )),
                None => wasi.stdout(stdout.clone()).stderr(stderr.clone()),
            };
        } else {
            wasi.inherit_stdout().inherit_stderr();
        }
        if let Some(dir) = &job.dir
            && let Err(e) = wasi.preopened_dir(dir, ".", FsPerms::ReadWrite)
        {
            return (Err(fail(format!("cannot open {}: {e}", dir.display()))), rt);
        }
        let state = AppState {
            rt: SendWrapper::new(rt),
            recordings: SendWrapper::new(Default::default()),
            calls: (0, 0),
            served,
            wasi: wasi.build(),
            table: ResourceTable::new(),
            dir: job.dir.clone(),
            dir_bytes: job.limits.dir_bytes,
            limiter: Limiter::new(&weft_plugin::PluginLimits {
                memory_bytes: job.limits.memory_bytes,
                ..Default::default()
            }),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every tick, the callback stops the application past its deadline or once it is
        // cancelled; a trap it raises is told apart by `describe`.
        let deadline = Instant::now().checked_add(job.limits.time);
        let cancel = job.cancel.clone();
        let quota = job.dir.clone().zip(job.limits.dir_bytes);
        let mut ticks = 0u64;
        store.epoch_deadline_callback(move |cx| {
            if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                return Err(wasmtime::Error::new(Stopped::Cancelled));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(wasmtime::Error::new(Stopped::TimeLimit));
            }
            // On a job's ranks: its part stopped here (a failed task) or on a rank that told.
            if let Some(why) = cx
                .data()
                .rt
                .config()
                .ranks
                .as_ref()
                .and_then(|r| r.stopped())
            {
                return Err(wasmtime::Error::new(Stopped::Ranks(why)));
            }
            ticks += 1;
            if ticks.is_multiple_of(DIR_CHECK_TICKS)
                && let Some((dir, limit)) = &quota
            {
                let held = dir_bytes(dir);
                if held > *limit {
                    return Err(wasmtime::Error::new(Stopped::DirBytes(held, *limit)));
                }
            }
            Ok(wasmtime::UpdateDeadline::Continue(1))
        });
        store.set_epoch_deadline(1);
        let ran = run_command(&self.engine, &mut store, component);
        let state = store.into_data();
        let AppState {
            rt, table, calls, ..
        } = state;
        // The application's handles go before the runtime comes back.
        drop(table);
        let rt = rt.take();
        let outcome = match ran {
            Ok(status) => Ok(JobOutcome {
                status,
                stdout: stdout.contents().to_vec(),
                stderr: stderr.contents().to_vec(),
                calls_made: calls.0,
                calls_replayed: calls.1,
            }),
            Err(e) => Err(fail(describe(&e, job))),
        };
        (outcome, rt)
    }
}

/// Instantiates the component as a WASI command and runs it to its exit status.
fn run_command(
    engine: &Engine,
    store: &mut Store<AppState>,
    component: &Component,
) -> wasmtime::Result<i32> {
    let linker = linker_for(engine, component)?;
    let command = Command::instantiate(&mut *store, component, &linker)?;
    match command.wasi_cli_run().call_run(&mut *store) {
        Ok(Ok(())) => Ok(0),
        Ok(Err(())) => Ok(1),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            Some(exit) => Ok(exit.0),
            None => Err(e),
        },
    }
}

/// Why the epoch callback stopped an application.
#[derive(Debug, thiserror::Error)]
enum Stopped {
    #[error("past its time limit")]
    TimeLimit,
    #[error("cancelled")]
    Cancelled,
    #[error("its files held {0} bytes, past its quota of {1}")]
    DirBytes(u64, u64),
    #[error("stopped: {0}")]
    Ranks(String),
}

/// A trap's message in words: a deadline or a cancellation named as such.
fn describe(e: &wasmtime::Error, job: &Job) -> String {
    match e.downcast_ref::<Stopped>() {
        Some(Stopped::TimeLimit) => format!(
            "it ran past its time limit of {:?} and was stopped",
            job.limits.time
        ),
        Some(Stopped::Cancelled) => "it was cancelled".to_string(),
        Some(Stopped::DirBytes(held, limit)) => format!(
            "its files held {held} bytes, past its quota of {limit} bytes, and it was stopped"
        ),
        Some(Stopped::Ranks(why)) => format!("it was stopped: {why}"),
        None => format!("{e:#}"),
    }
}
