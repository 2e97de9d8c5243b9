//! The command line: one subcommand per stage, parsed by `clap`, into a [`Command`] that
//! runs its stage.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::error::ErrorKind;
use clap::{Arg, ArgAction, ArgMatches, Command as Clap, value_parser};
use serde_json::{Map, Value};
use weft::Device;
use weft_examples::AppError;

use crate::bench::Workload;

/// Options every stage takes.
#[derive(Clone, Debug)]
pub struct Common {
    /// Where the stage runs: the GPU, the simulator (or the CPU, where a stage allows it).
    pub device: Device,
    /// Sizes the simulator runs in seconds.
    pub small: bool,
    /// Worker threads of the CPU runtimes (0: one per core, or `WEFT_THREADS`).
    pub threads: usize,
}

/// `bits`: its children's limits.
#[derive(Clone, Debug)]
pub struct BitsArgs {
    /// The common options.
    pub common: Common,
    /// The longest one child may run, in seconds.
    pub timeout: f64,
    /// The longest the whole stage may run, in seconds: children not started by then are
    /// reported as skipped.
    pub budget: f64,
    /// The programs to run (every one when empty).
    pub programs: Vec<String>,
}

/// `bits-one`: one program on one device.
#[derive(Clone, Debug)]
pub struct BitsOneArgs {
    /// The common options (`cpu` allowed).
    pub common: Common,
    /// The program's name ([`crate::programs::NAMES`]).
    pub program: String,
}

/// `jit`: where the kernels come from.
#[derive(Clone, Debug)]
pub struct JitArgs {
    /// The common options.
    pub common: Common,
    /// A file `record` wrote; none: record the kernels in this process first.
    pub kernels: Option<PathBuf>,
}

/// `bench`: the workloads and their sizes (none: the stage's defaults, see
/// [`crate::bench::Sizes`]).
#[derive(Clone, Debug)]
pub struct BenchArgs {
    /// The common options (`cpu` allowed).
    pub common: Common,
    /// The workloads to run.
    pub workloads: Vec<Workload>,
    /// Black-Scholes options.
    pub options: Option<u64>,
    /// The stencil's interior side.
    pub stencil_n: Option<u64>,
    /// Stencil sweeps per timed iteration.
    pub sweeps: Option<u64>,
    /// The Poisson grid side of CG and BiCGSTAB.
    pub grid: Option<u64>,
    /// Dense Jacobi's unknowns.
    pub jacobi_n: Option<u64>,
    /// Timed iterations.
    pub iters: Option<u64>,
    /// Untimed warm-up iterations.
    pub warmup: Option<u64>,
    /// Bytes of each copy of the probe, in MiB.
    pub probe_mib: Option<u64>,
}

/// A parsed command line.
#[derive(Clone, Debug)]
pub enum Command {
    /// `env`.
    Env(Common),
    /// `bits`.
    Bits(BitsArgs),
    /// `bits-one`.
    BitsOne(BitsOneArgs),
    /// `record --out FILE`.
    Record {
        /// The common options.
        common: Common,
        /// Where the kernels go.
        out: PathBuf,
    },
    /// `jit`.
    Jit(JitArgs),
    /// `bench`.
    Bench(BenchArgs),
}

/// Why parsing stopped.
pub enum Stop {
    /// `--help`: the text to print.
    Help(String),
    /// A bad command line: the stage it was for (or `usage`) and what is wrong.
    Bad {
        /// The subcommand, if one was recognized.
        stage: String,
        /// clap's message.
        message: String,
    },
}

const GPU_OR_SIM: &[&str] = &["gpu", "sim"];
const ANY_DEVICE: &[&str] = &["gpu", "sim", "cpu"];

fn common_args(cmd: Clap, devices: &'static [&'static str]) -> Clap {
    cmd.arg(
        Arg::new("device")
            .long("device")
            .value_name("D")
            .help("where the stage runs (sim: the GPU back end on the PTX simulator)")
            .value_parser(PossibleValuesParser::new(devices))
            .default_value("gpu"),
    )
    .arg(
        Arg::new("small")
            .long("small")
            .help("small sizes, which the simulator runs in seconds")
            .action(ArgAction::SetTrue),
    )
    .arg(
        Arg::new("threads")
            .long("threads")
            .value_name("T")
            .help("worker threads of CPU runtimes (default: WEFT_THREADS, else one per core)")
            .value_parser(value_parser!(u64).range(1..=4096)),
    )
}

fn count(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("N")
        .help(help)
        .value_parser(value_parser!(u64).range(1..=(1u64 << 40)))
}

fn seconds(name: &'static str, help: &'static str, default: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("S")
        .help(help)
        .value_parser(value_parser!(u64).range(1..=86_400))
        .default_value(default)
}

/// The `clap` description.
pub fn command() -> Clap {
    Clap::new("weft-gpu-check")
        .about("Weft's staged GPU checks; each subcommand prints one JSON line.")
        .disable_version_flag(true)
        .subcommand_required(true)
        .subcommand(common_args(
            Clap::new("env").about(
                "driver, device, alloc and copies, one launch, a planted fault, the copy probe",
            ),
            GPU_OR_SIM,
        ))
        .subcommand(
            common_args(
                Clap::new("bits").about(
                    "the bit-exactness programs on the CPU and on the device, each in a child \
                     process; every difference listed",
                ),
                GPU_OR_SIM,
            )
            .arg(seconds("timeout", "the longest one child may run", "60"))
            .arg(seconds(
                "budget",
                "the longest the whole stage may run; later children are skipped",
                "600",
            ))
            .arg(
                Arg::new("program")
                    .long("program")
                    .value_name("NAME")
                    .help("run only this program (repeatable)")
                    .action(ArgAction::Append)
                    .value_parser(PossibleValuesParser::new(crate::programs::NAMES)),
            ),
        )
        .subcommand(
            common_args(
                Clap::new("bits-one")
                    .about("one bit-exactness program on one device (run by `bits`)"),
                ANY_DEVICE,
            )
            .arg(
                Arg::new("program")
                    .long("program")
                    .value_name("NAME")
                    .required(true)
                    .value_parser(PossibleValuesParser::new(crate::programs::NAMES)),
            ),
        )
        .subcommand(
            common_args(
                Clap::new("record").about(
                    "runs the examples small on the CPU and writes every kernel they prepare \
                     (JSON lines: name, IR text)",
                ),
                ANY_DEVICE,
            )
            .arg(
                Arg::new("out")
                    .long("out")
                    .value_name("FILE")
                    .required(true)
                    .value_parser(value_parser!(PathBuf)),
            ),
        )
        .subcommand(
            common_args(
                Clap::new("jit").about(
                    "loads every recorded kernel into a fresh GPU back end, timing each module",
                ),
                GPU_OR_SIM,
            )
            .arg(
                Arg::new("kernels")
                    .long("kernels")
                    .value_name("FILE")
                    .help("the kernels `record` wrote (default: record them now)")
                    .value_parser(value_parser!(PathBuf)),
            ),
        )
        .subcommand(
            common_args(
                Clap::new("bench")
                    .about("the benchmarks against the device's copy probe (one JSON line)"),
                ANY_DEVICE,
            )
            .arg(
                Arg::new("workload")
                    .long("workload")
                    .value_name("W")
                    .help("the workload (repeatable)")
                    .action(ArgAction::Append)
                    .value_parser(PossibleValuesParser::new(Workload::CHOICES))
                    .default_value("all"),
            )
            .arg(count("options", "Black-Scholes options [default: 2^26]"))
            .arg(count(
                "stencil-n",
                "the stencil's interior side [default: 8190]",
            ))
            .arg(count(
                "sweeps",
                "stencil sweeps per timed iteration [default: 10]",
            ))
            .arg(count(
                "grid",
                "the Poisson grid side of CG and BiCGSTAB [default: 2000]",
            ))
            .arg(count("jacobi-n", "dense Jacobi's unknowns [default: 8192]"))
            .arg(count("iters", "timed iterations of every workload"))
            .arg(
                Arg::new("warmup")
                    .long("warmup")
                    .value_name("W")
                    .help("untimed warm-up iterations of every workload")
                    .value_parser(value_parser!(u64).range(0..=1000)),
            )
            .arg(count(
                "probe-mib",
                "MiB per copy of the copy probe [default: 512]",
            )),
        )
}

/// Parses the arguments (without the program name).
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, Stop> {
    let args: Vec<OsString> = args.into_iter().collect();
    // The stage a bad command line was meant for, if its first word names one.
    let stage = args
        .first()
        .and_then(|a| a.to_str())
        .filter(|a| command().get_subcommands().any(|s| s.get_name() == *a))
        .unwrap_or("usage")
        .to_string();
    let argv = std::iter::once(OsString::from("weft-gpu-check")).chain(args);
    let matches = command()
        .try_get_matches_from(argv)
        .map_err(|e| match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                Stop::Help(e.render().to_string())
            }
            _ => Stop::Bad {
                stage: stage.clone(),
                message: e.render().to_string().trim().to_string(),
            },
        })?;
    let (name, m) = matches.subcommand().ok_or_else(|| Stop::Bad {
        stage: "usage".to_string(),
        message: "a subcommand is required".to_string(),
    })?;
    let common = common_of(m);
    let num = |key: &str| m.get_one::<u64>(key).copied();
    Ok(match name {
        "env" => Command::Env(common),
        "bits" => Command::Bits(BitsArgs {
            common,
            timeout: num("timeout").unwrap_or(60) as f64,
            budget: num("budget").unwrap_or(600) as f64,
            programs: m
                .get_many::<String>("program")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
        }),
        "bits-one" => Command::BitsOne(BitsOneArgs {
            common,
            program: m.get_one::<String>("program").cloned().unwrap_or_default(),
        }),
        "record" => Command::Record {
            common,
            out: m.get_one::<PathBuf>("out").cloned().unwrap_or_default(),
        },
        "jit" => Command::Jit(JitArgs {
            common,
            kernels: m.get_one::<PathBuf>("kernels").cloned(),
        }),
        "bench" => {
            let words: Vec<String> = m
                .get_many::<String>("workload")
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            Command::Bench(BenchArgs {
                common,
                workloads: Workload::parse_all(&words),
                options: num("options"),
                stencil_n: num("stencil-n"),
                sweeps: num("sweeps"),
                grid: num("grid"),
                jacobi_n: num("jacobi-n"),
                iters: num("iters"),
                warmup: num("warmup"),
                probe_mib: num("probe-mib"),
            })
        }
        other => {
            return Err(Stop::Bad {
                stage: other.to_string(),
                message: format!("unknown subcommand `{other}`"),
            });
        }
    })
}

fn common_of(m: &ArgMatches) -> Common {
    let device = m
        .get_one::<String>("device")
        .and_then(|d| Device::from_name(d))
        .unwrap_or(Device::Gpu);
    let threads = m
        .get_one::<u64>("threads")
        .map(|&t| t as usize)
        .unwrap_or_else(weft_examples::cli::default_threads);
    Common {
        device,
        small: m.get_flag("small"),
        threads,
    }
}

impl Command {
    /// The stage's name in its JSON line.
    pub fn stage(&self) -> &'static str {
        match self {
            Command::Env(_) => "env",
            Command::Bits(_) => "bits",
            Command::BitsOne(_) => "bits-one",
            Command::Record { .. } => "record",
            Command::Jit(_) => "jit",
            Command::Bench(_) => "bench",
        }
    }

    fn common(&self) -> &Common {
        match self {
            Command::Env(c) | Command::Record { common: c, .. } => c,
            Command::Bits(a) => &a.common,
            Command::BitsOne(a) => &a.common,
            Command::Jit(a) => &a.common,
            Command::Bench(a) => &a.common,
        }
    }

    /// The device the stage runs on, by name.
    pub fn device_name(&self) -> &'static str {
        match self {
            // `record` always runs on the CPU.
            Command::Record { .. } => "cpu",
            c => c.common().device.name(),
        }
    }

    /// Runs the stage, filling `out` with its details.
    pub fn run(&self, out: &mut Map<String, Value>) -> Result<(), AppError> {
        out.insert("small".into(), self.common().small.into());
        match self {
            Command::Env(c) => crate::env::run(c, out),
            Command::Bits(a) => crate::bits::run(a, out),
            Command::BitsOne(a) => crate::programs::run_one(a, out),
            Command::Record { common, out: path } => crate::record::run(common, path, out),
            Command::Jit(a) => crate::jit::run(a, out),
            Command::Bench(a) => crate::bench::run(a, out),
        }
    }
}
