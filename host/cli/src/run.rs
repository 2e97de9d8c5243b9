//! `weft run`: one application component, sandboxed, on a fresh runtime.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use weft::{Config, Device, Runtime};
use weft_apps::{AppHost, AppLimits, Job};

/// The `run` subcommand's arguments.
pub fn command() -> Command {
    Command::new("run")
        .about("Runs an application component, sandboxed")
        .arg(Arg::new("app").required(true).value_name("APP.wasm"))
        .arg(
            Arg::new("plugin")
                .long("plugin")
                .value_name("P.wasm")
                .action(ArgAction::Append)
                .help("another plugin component to load (numeric and sparse always are)"),
        )
        .arg(
            Arg::new("threads")
                .long("threads")
                .value_name("N")
                .value_parser(value_parser!(u64).range(1..=4096))
                .help("worker threads (default: WEFT_THREADS, else one per core)"),
        )
        .arg(
            Arg::new("dir")
                .long("dir")
                .value_name("DIR")
                .help("a directory the application may read and write, as its `.`"),
        )
        .arg(
            Arg::new("device")
                .long("device")
                .value_parser(["cpu", "gpu"])
                .help("where stores live and kernels run (default: WEFT_DEVICE, else cpu)"),
        )
        .arg(
            Arg::new("time-limit")
                .long("time-limit")
                .value_name("SECONDS")
                .value_parser(value_parser!(u64).range(1..))
                .help("the longest the application may run (default 600)"),
        )
        .arg(
            Arg::new("memory-mb")
                .long("memory-mb")
                .value_name("MB")
                .value_parser(value_parser!(u64).range(1..=65536))
                .help("the application's own linear memory cap (default 256)"),
        )
        .arg(
            Arg::new("args")
                .num_args(0..)
                .last(true)
                .value_name("ARGS")
                .help("the application's arguments, after `--`"),
        )
}

/// Runs it; the application's exit status.
pub fn main(m: &ArgMatches) -> Result<i32, String> {
    let app_path = PathBuf::from(m.get_one::<String>("app").ok_or("no application given")?);
    let name = app_path
        .file_stem()
        .map_or_else(|| "app".to_string(), |s| s.to_string_lossy().into_owned());
    let bytes =
        std::fs::read(&app_path).map_err(|e| format!("cannot read {}: {e}", app_path.display()))?;
    let mut config = Config::from_env();
    if let Some(&t) = m.get_one::<u64>("threads") {
        config.threads = usize::try_from(t).map_err(|e| e.to_string())?;
    }
    if let Some(d) = m.get_one::<String>("device") {
        config.device = if d == "gpu" { Device::Gpu } else { Device::Cpu };
    }
    let mut rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let mut plugins = vec![
        rt.load(weft_plugin_artifacts::NUMERIC)
            .map_err(|e| e.to_string())?,
        rt.load(weft_plugin_artifacts::SPARSE)
            .map_err(|e| e.to_string())?,
    ];
    for p in m.get_many::<String>("plugin").into_iter().flatten() {
        let b = std::fs::read(p).map_err(|e| format!("cannot read plugin {p}: {e}"))?;
        plugins.push(rt.load(&b).map_err(|e| e.to_string())?);
    }
    let mut limits = AppLimits::default();
    if let Some(&s) = m.get_one::<u64>("time-limit") {
        limits.time = Duration::from_secs(s);
    }
    if let Some(&mb) = m.get_one::<u64>("memory-mb") {
        limits.memory_bytes = usize::try_from(mb << 20).map_err(|e| e.to_string())?;
    }
    let job = Job {
        name: name.clone(),
        args: m
            .get_many::<String>("args")
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
        env: Vec::new(),
        dir: m.get_one::<String>("dir").map(PathBuf::from),
        capture: false,
        limits,
        output: None,
        cancel: None,
    };
    let host = AppHost::new().map_err(|e| e.to_string())?;
    let component = host.compile(&name, &bytes).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let progress = Progress::start(&name);
    let (outcome, mut rt) = host.run(rt, &plugins, &component, &job);
    drop(progress);
    let seconds = start.elapsed().as_secs_f64();
    let stats = rt.stats();
    let functions = rt.functions();
    let (status, error, calls) = match &outcome {
        Ok(o) => (o.status, None, Some((o.calls_made, o.calls_replayed))),
        Err(e) => (1, Some(e.to_string()), None),
    };
    let summary = serde_json::json!({
        "app": name,
        "status": status,
        "error": error,
        "seconds": seconds,
        "plugin_calls_made": calls.map(|c| c.0),
        "plugin_calls_replayed": calls.map(|c| c.1),
        "tasks_submitted": stats.tasks_submitted,
        "tasks_executed": stats.exec.tasks_executed,
        "kernels_compiled": stats.exec.kernels_compiled,
        "functions_compiled": functions.compiled,
        "functions_from_cache": functions.from_cache,
    });
    eprintln!("{summary}");
    Ok(status)
}

/// A line on standard error, redrawn each second while the job runs, where standard error
/// is a terminal; cleared when dropped.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(name: &str) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let (stop, name) = (stop.clone(), name.to_string());
            std::thread::spawn(move || {
                let start = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    eprint!(
                        "\r\x1b[2Kweft: {name} running, {:.0} s",
                        start.elapsed().as_secs_f64()
                    );
                }
                eprint!("\r\x1b[2K");
            })
        });
        Progress { stop, thread }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
