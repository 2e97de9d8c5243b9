//! The command line shared by the example binaries, parsed by `clap`.
//!
//! Every example takes the common flags `--n N --iters K --warmup W --threads T --seed S
//! --out DIR` plus its own extras. Flags are written `--name value` or `--name=value`. A bad
//! command line (an unknown flag, a missing or malformed value, zero where zero makes no
//! sense) prints a message and the usage to stderr and exits with code 2; `--help` (or `-h`)
//! prints the usage to stdout and exits with code 0. Nothing here panics on user input.
//!
//! [`Cli`] describes the flags (a builder the binaries share: `range`, `help`, `extra`);
//! [`Cli::command`] turns the description into a `clap::Command`, which does the parsing and
//! the usage text.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use clap::builder::ValueParser;
use clap::error::ErrorKind;
use clap::{Arg, ArgAction, Command};

use weft::{Config, Device};

/// What values a flag accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A non-negative integer in `min..=max`.
    Count {
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A finite float at least `min`.
    Float {
        /// The smallest accepted value.
        min: f64,
    },
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A file-system path.
    Path,
    /// Any text (a list of names, say); may be empty.
    Text,
    /// A switch that takes no value (present or absent).
    Switch,
}

/// One flag: `--name METAVAR`, what it means, what it accepts and its default.
#[derive(Clone, Debug)]
pub struct Flag {
    /// The name, without the leading `--`.
    pub name: &'static str,
    /// How the value is shown in the usage (`N`, `DIR`, ...).
    pub metavar: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// What it accepts.
    pub kind: Kind,
    /// The default value, as it would be written on the command line (none: absent).
    pub default: Option<String>,
}

/// Why parsing stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// `--help` or `-h` was given.
    Help,
    /// The command line is wrong; the message says how.
    Bad(String),
}

/// A command line's description: the program, what it does, and its flags.
#[derive(Clone, Debug)]
pub struct Cli {
    program: &'static str,
    about: &'static str,
    flags: Vec<Flag>,
}

/// Parsed flags: the common ones as fields, the extras by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// The problem size (`--n`).
    pub n: u64,
    /// Timed iterations (`--iters`).
    pub iters: usize,
    /// Untimed warm-up iterations before the timed ones (`--warmup`).
    pub warmup: usize,
    /// Worker threads (`--threads`).
    pub threads: usize,
    /// The seed of the random inputs (`--seed`).
    pub seed: u64,
    /// Where to write `.npy` files (`--out`), if anywhere.
    pub out: Option<PathBuf>,
    /// Whether tasks are fused (`--no-fusion` turns it off; so does `WEFT_FUSION=0`).
    pub fusion: bool,
    /// Where stores live and kernels run (`--device`).
    pub device: Device,
    /// The job's ranks (`mpirun -n N`; one rank otherwise), set by
    /// [`Cli::parse_env_or_exit`].
    pub ranks: Option<weft::Ranks>,
    extras: BTreeMap<&'static str, String>,
}

/// The default device: `WEFT_DEVICE` if it names one, else the CPU.
pub fn default_device() -> Device {
    Config::from_env().device
}

/// The default worker count: `WEFT_THREADS` if set, else one per core.
pub fn default_threads() -> usize {
    match Config::from_env().threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    }
}

impl Cli {
    /// A command line with the common flags and these defaults for `--n` and `--iters`.
    pub fn new(program: &'static str, about: &'static str, n: u64, iters: u64) -> Cli {
        let flags = vec![
            Flag {
                name: "n",
                metavar: "N",
                help: "problem size",
                kind: Kind::Count {
                    min: 1,
                    max: u64::MAX,
                },
                default: Some(n.to_string()),
            },
            Flag {
                name: "iters",
                metavar: "K",
                help: "timed iterations",
                kind: Kind::Count {
                    min: 1,
                    max: u64::MAX,
                },
                default: Some(iters.to_string()),
            },
            Flag {
                name: "warmup",
                metavar: "W",
                help: "untimed warm-up iterations before the timed ones",
                kind: Kind::Count {
                    min: 0,
                    max: u64::MAX,
                },
                default: Some("1".into()),
            },
            Flag {
                name: "threads",
                metavar: "T",
                help: "worker threads (default: WEFT_THREADS, else one per core)",
                kind: Kind::Count {
                    min: 1,
                    max: u64::MAX,
                },
                default: Some(default_threads().to_string()),
            },
            Flag {
                name: "seed",
                metavar: "S",
                help: "seed of the random inputs",
                kind: Kind::Count {
                    min: 0,
                    max: u64::MAX,
                },
                default: Some("42".into()),
            },
            Flag {
                name: "out",
                metavar: "DIR",
                help: "write inputs and outputs as .npy files into DIR (created if missing)",
                kind: Kind::Path,
                default: None,
            },
            Flag {
                name: "device",
                metavar: "D",
                help: "where stores live and kernels run: cpu or gpu, or sim (the GPU back end \
                       on a simulated GPU, for tests) (default: WEFT_DEVICE, else cpu)",
                kind: Kind::Choice(&["cpu", "gpu", "sim"]),
                default: Some(default_device().name().to_string()),
            },
            Flag {
                name: "no-fusion",
                metavar: "",
                help: "run every task on its own (as WEFT_FUSION=0 does)",
                kind: Kind::Switch,
                default: None,
            },
        ];
        Cli {
            program,
            about,
            flags,
        }
    }

    /// Limits a [`Kind::Count`] flag to `min..=max` (to keep sizes from overflowing).
    pub fn range(mut self, name: &str, min: u64, max: u64) -> Cli {
        for f in self.flags.iter_mut().filter(|f| f.name == name) {
            if let Kind::Count { .. } = f.kind {
                f.kind = Kind::Count { min, max };
            }
        }
        self
    }

    /// Replaces the help line of a flag (to say what `--n` or `--iters` mean here).
    pub fn help(mut self, name: &str, help: &'static str) -> Cli {
        for f in self.flags.iter_mut().filter(|f| f.name == name) {
            f.help = help;
        }
        self
    }

    /// Replaces the default of a flag (a benchmark that warms up longer than the common
    /// `--warmup`).
    pub fn default_value(mut self, name: &str, default: &str) -> Cli {
        for f in self.flags.iter_mut().filter(|f| f.name == name) {
            f.default = Some(default.to_string());
        }
        self
    }

    /// Adds `--k K`, a product's inner dimension up to `max` (`0`, the default, meaning
    /// `--n`; [`Args::inner_dimension`] reads it), with `help` saying what it counts.
    pub fn inner_dimension(self, help: &'static str, max: u64) -> Cli {
        self.extra("k", "K", help, Kind::Count { min: 0, max }, "0")
    }

    /// Adds an example-specific flag.
    pub fn extra(
        mut self,
        name: &'static str,
        metavar: &'static str,
        help: &'static str,
        kind: Kind,
        default: &str,
    ) -> Cli {
        self.flags.retain(|f| f.name != name);
        self.flags.push(Flag {
            name,
            metavar,
            help,
            kind,
            default: Some(default.to_string()),
        });
        self
    }

    /// The `clap` command of this description.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(self.program)
            .about(self.about)
            .disable_version_flag(true)
            .help_template("Usage: {usage}\n\n{about}\n\nOptions:\n{options}\n");
        for f in &self.flags {
            let mut help = f.help.to_string();
            if let Kind::Choice(words) = f.kind {
                help.push_str(&format!(" (one of: {})", words.join(", ")));
            }
            if let Some(d) = f.default.as_ref().filter(|d| !d.is_empty()) {
                help.push_str(&format!(" [default: {d}]"));
            }
            let arg = Arg::new(f.name).long(f.name).help(help);
            let arg = match f.kind {
                Kind::Switch => arg.action(ArgAction::SetTrue),
                kind => arg
                    .action(ArgAction::Set)
                    .allow_negative_numbers(true)
                    .value_name(f.metavar)
                    .value_parser(checker(f.name, kind)),
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    /// The usage message.
    pub fn usage(&self) -> String {
        self.command().render_help().to_string()
    }

    /// Parses the arguments (without the program name).
    pub fn parse<I, S>(&self, args: I) -> Result<Args, ParseError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let argv =
            std::iter::once(self.program.to_string()).chain(args.into_iter().map(Into::into));
        let matches = self
            .command()
            .try_get_matches_from(argv)
            .map_err(|e| match e.kind() {
                ErrorKind::DisplayHelp => ParseError::Help,
                _ => ParseError::Bad(clean(&e.to_string())),
            })?;
        let mut values: BTreeMap<&'static str, String> = self
            .flags
            .iter()
            .filter_map(|f| f.default.clone().map(|d| (f.name, d)))
            .collect();
        for f in &self.flags {
            if f.kind == Kind::Switch {
                if matches.get_flag(f.name) {
                    values.insert(f.name, "1".into());
                }
            } else if let Some(v) = matches.get_one::<String>(f.name) {
                values.insert(f.name, v.clone());
            }
        }
        let count = |name: &str| -> Result<u64, ParseError> {
            values
                .get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| ParseError::Bad(format!("flag `--{name}` has no value")))
        };
        let usize_of = |name: &str| -> Result<usize, ParseError> {
            usize::try_from(count(name)?)
                .map_err(|_| ParseError::Bad(format!("flag `--{name}` is too large")))
        };
        let common = [
            "n",
            "iters",
            "warmup",
            "threads",
            "seed",
            "out",
            "no-fusion",
            "device",
        ];
        Ok(Args {
            fusion: !values.contains_key("no-fusion"),
            device: values
                .get("device")
                .and_then(|v| Device::from_name(v))
                .unwrap_or_default(),
            n: count("n")?,
            iters: usize_of("iters")?,
            warmup: usize_of("warmup")?,
            threads: usize_of("threads")?,
            seed: count("seed")?,
            out: values.get("out").map(PathBuf::from),
            ranks: None,
            extras: values
                .iter()
                .filter(|(k, _)| !common.contains(k))
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        })
    }

    /// Parses the process's arguments; on `--help` prints the usage and exits with 0, on a
    /// bad command line prints the problem and the usage to stderr and exits with 2.
    pub fn parse_env_or_exit(&self) -> Args {
        match self.parse(std::env::args().skip(1)) {
            Ok(mut args) => match weft::Ranks::world() {
                Ok(ranks) => {
                    args.ranks = Some(ranks);
                    args
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "{}: {e}", self.program);
                    std::process::exit(2);
                }
            },
            Err(ParseError::Help) => {
                // A closed stdout is no reason to fail.
                let _ = std::io::stdout().lock().write_all(self.usage().as_bytes());
                std::process::exit(0);
            }
            Err(ParseError::Bad(message)) => {
                let text = format!("{}: {message}\n\n{}", self.program, self.usage());
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
                std::process::exit(2);
            }
        }
    }
}

/// clap's message without its own usage and hint lines (the usage follows in full).
fn clean(message: &str) -> String {
    message
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.trim_start().starts_with("tip:"))
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A value parser that checks a value against its flag's kind and keeps it as text.
fn checker(name: &'static str, kind: Kind) -> ValueParser {
    ValueParser::new(move |value: &str| check(name, kind, value).map(|()| value.to_string()))
}

/// Checks one value against its flag's kind.
fn check(name: &str, kind: Kind, value: &str) -> Result<(), String> {
    match kind {
        Kind::Count { min, max } => match value.parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(()),
            Ok(v) if v < min => Err(format!("flag `--{name}` must be at least {min}, got {v}")),
            Ok(v) => Err(format!("flag `--{name}` must be at most {max}, got {v}")),
            Err(_) => Err(format!(
                "flag `--{name}` needs a non-negative integer, got `{value}`"
            )),
        },
        Kind::Float { min } => match value.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= min => Ok(()),
            Ok(v) if v.is_finite() => {
                Err(format!("flag `--{name}` must be at least {min}, got {v}"))
            }
            _ => Err(format!(
                "flag `--{name}` needs a finite number, got `{value}`"
            )),
        },
        Kind::Choice(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err(format!(
                    "flag `--{name}` must be one of {}, got `{value}`",
                    words.join(", ")
                ))
            }
        }
        Kind::Path => {
            if value.is_empty() {
                Err(format!("flag `--{name}` needs a path"))
            } else {
                Ok(())
            }
        }
        Kind::Text => Ok(()),
        Kind::Switch => Err(format!("flag `--{name}` takes no value")),
    }
}

impl Args {
    /// The `--k` of [`Cli::inner_dimension`]: its value, or `--n` for 0.
    pub fn inner_dimension(&self) -> Result<u64, String> {
        match self.extra_u64("k") {
            Some(0) => Ok(self.n),
            Some(k) => Ok(k),
            None => Err("bad --k".to_string()),
        }
    }

    /// The value of an extra flag as given (or its default); `None` for an undeclared name.
    pub fn extra(&self, name: &str) -> Option<&str> {
        self.extras.get(name).map(String::as_str)
    }

    /// The value of a [`Kind::Float`] extra flag.
    pub fn extra_f64(&self, name: &str) -> Option<f64> {
        self.extra(name)?.parse().ok()
    }

    /// The value of a [`Kind::Count`] extra flag.
    pub fn extra_u64(&self, name: &str) -> Option<u64> {
        self.extra(name)?.parse().ok()
    }

    /// The runtime configuration: the environment's, with `--threads` worker threads and the
    /// `--device`.
    pub fn config(&self) -> Config {
        let env = Config::from_env();
        Config {
            threads: self.threads,
            fusion: env.fusion && self.fusion,
            device: self.device,
            ranks: self.ranks.clone(),
            ..env
        }
    }

    /// This process's rank (0 without MPI).
    pub fn rank(&self) -> usize {
        self.ranks.as_ref().map_or(0, weft::Ranks::rank)
    }

    /// The number of ranks (1 without MPI).
    pub fn rank_count(&self) -> usize {
        self.ranks.as_ref().map_or(1, weft::Ranks::size)
    }

    /// Prints one line on stdout from rank 0 only (see [`crate::say`]).
    pub fn say(&self, line: &str) -> std::io::Result<()> {
        if self.rank() == 0 {
            crate::say(line)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Cli {
        Cli::new("demo", "A demo.", 100, 5).extra(
            "cnd",
            "KIND",
            "how",
            Kind::Choice(&["erf", "poly"]),
            "erf",
        )
    }

    fn bad(args: &[&str]) -> String {
        match cli().parse(args.iter().copied()) {
            Err(ParseError::Bad(m)) => m,
            other => panic!("{args:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn defaults_and_values() {
        let a = cli().parse(Vec::<String>::new()).expect("parses");
        assert_eq!((a.n, a.iters, a.warmup, a.seed), (100, 5, 1, 42));
        assert_eq!(a.out, None);
        assert_eq!(a.extra("cnd"), Some("erf"));
        let a = cli()
            .parse([
                "--n",
                "7",
                "--iters=3",
                "--threads",
                "2",
                "--out",
                "d",
                "--cnd=poly",
            ])
            .expect("parses");
        assert_eq!((a.n, a.iters, a.threads), (7, 3, 2));
        assert_eq!(a.out, Some(PathBuf::from("d")));
        assert_eq!(a.extra("cnd"), Some("poly"));
        assert_eq!(a.extra("nope"), None);
    }

    #[test]
    fn bad_command_lines() {
        assert!(bad(&["--bogus", "1"]).contains("unexpected argument '--bogus'"));
        assert!(bad(&["--n"]).contains("a value is required for '--n <N>'"));
        assert!(bad(&["--n", "--iters", "2"]).contains("a value is required"));
        assert!(bad(&["--n", "ten"]).contains("non-negative integer"));
        assert!(bad(&["--n", "-3"]).contains("non-negative integer"));
        assert!(bad(&["--n=-3"]).contains("non-negative integer"));
        assert!(bad(&["--n", "0"]).contains("at least 1"));
        assert!(bad(&["--iters", "0"]).contains("at least 1"));
        assert!(bad(&["--threads", "0"]).contains("at least 1"));
        assert!(bad(&["--n", "99999999999999999999999"]).contains("non-negative integer"));
        assert!(bad(&["--cnd", "exact"]).contains("one of erf, poly"));
        assert!(bad(&["stray"]).contains("unexpected argument"));
        assert!(bad(&["--out="]).contains("needs a path"));
        let small = cli().range("n", 1, 10);
        assert!(small.parse(["--n", "10"]).is_ok());
        assert!(
            matches!(small.parse(["--n", "11"]), Err(ParseError::Bad(m)) if m.contains("at most 10"))
        );
    }

    #[test]
    fn help_and_usage() {
        assert_eq!(cli().parse(["--n", "3", "--help"]), Err(ParseError::Help));
        assert_eq!(cli().parse(["-h"]), Err(ParseError::Help));
        let u = cli().help("n", "grid size").usage();
        assert!(u.contains("grid size [default: 100]"), "{u}");
        for word in [
            "Usage: demo",
            "--n <N>",
            "--iters <K>",
            "--out <DIR>",
            "--cnd <KIND>",
            "--help",
        ] {
            assert!(u.contains(word), "usage lacks {word}:\n{u}");
        }
    }

    #[test]
    fn a_common_flag_takes_a_new_default() {
        let c = cli().default_value("warmup", "3");
        assert_eq!(c.parse(Vec::<String>::new()).map(|a| a.warmup), Ok(3));
        assert_eq!(c.parse(["--warmup", "0"]).map(|a| a.warmup), Ok(0));
        assert!(c.usage().contains("[default: 3]"));
    }

    #[test]
    fn floats() {
        let c = Cli::new("f", "f", 1, 1).extra("tol", "X", "t", Kind::Float { min: 0.0 }, "0.5");
        assert_eq!(
            c.parse(["--tol", "1e-3"]).map(|a| a.extra_f64("tol")),
            Ok(Some(1e-3))
        );
        assert!(matches!(c.parse(["--tol", "nan"]), Err(ParseError::Bad(_))));
        assert!(matches!(c.parse(["--tol", "-1"]), Err(ParseError::Bad(_))));
    }
}
