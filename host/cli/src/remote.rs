//! `weft submit|status|logs|cancel|fetch`: a tenant's commands against a `weft serve`.
//!
//! The server is `--server` (else `WEFT_SERVER`, else `http://127.0.0.1:7878`); the token
//! is `--token` (else `WEFT_TOKEN`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use weft_service::{Client, Submission};

/// The longest `--wait` and `logs` follow a job.
const FOLLOW: Duration = Duration::from_secs(24 * 3600);

fn connection(c: Command) -> Command {
    c.arg(
        Arg::new("server")
            .long("server")
            .value_name("URL")
            .help("the service (default: WEFT_SERVER, else http://127.0.0.1:7878)"),
    )
    .arg(
        Arg::new("token")
            .long("token")
            .value_name("TOKEN")
            .help("the tenant's token (default: WEFT_TOKEN)"),
    )
}

fn job_id(c: Command) -> Command {
    connection(c).arg(
        Arg::new("id")
            .required(true)
            .value_name("JOB")
            .value_parser(value_parser!(u64)),
    )
}

/// The subcommands.
pub fn commands() -> Vec<Command> {
    vec![
        connection(Command::new("submit"))
            .about("Submits an application component as a job of a `weft serve`")
            .arg(Arg::new("app").required(true).value_name("APP.wasm"))
            .arg(
                Arg::new("input")
                    .long("input")
                    .value_name("FILE")
                    .action(ArgAction::Append)
                    .help("a file put in the job's directory under its own name"),
            )
            .arg(
                Arg::new("wait")
                    .long("wait")
                    .action(ArgAction::SetTrue)
                    .help("follow the job, print its output, exit with its status"),
            )
            .arg(Arg::new("args").num_args(0..).last(true).value_name("ARGS")),
        job_id(Command::new("status")).about("Prints a job's record (JSON)"),
        job_id(Command::new("logs"))
            .about("Prints a job's output and fusion summaries, following it until it ends"),
        job_id(Command::new("cancel")).about("Cancels a job"),
        job_id(Command::new("fetch"))
            .about("Downloads a file of a finished job's directory")
            .arg(Arg::new("name").required(true).value_name("NAME"))
            .arg(
                Arg::new("output")
                    .short('o')
                    .long("output")
                    .value_name("FILE")
                    .help("where to write it (default: NAME here)"),
            ),
    ]
}

fn client(m: &ArgMatches) -> Result<Client, String> {
    let server = m
        .get_one::<String>("server")
        .cloned()
        .or_else(|| std::env::var("WEFT_SERVER").ok())
        .unwrap_or_else(|| "http://127.0.0.1:7878".into());
    let token = m
        .get_one::<String>("token")
        .cloned()
        .or_else(|| std::env::var("WEFT_TOKEN").ok())
        .ok_or("no token: give --token or set WEFT_TOKEN")?;
    Client::new(&server, &token).map_err(|e| e.to_string())
}

fn id(m: &ArgMatches) -> Result<u64, String> {
    m.get_one::<u64>("id")
        .copied()
        .ok_or_else(|| "no job id".into())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn pretty(v: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(v).map_err(|e| e.to_string())
}

/// Runs subcommand `name`; the exit status.
pub fn main(name: &str, m: &ArgMatches) -> Result<i32, String> {
    let c = client(m)?;
    match name {
        "submit" => submit(&c, m),
        "status" => {
            println!("{}", pretty(&c.job(id(m)?).map_err(|e| e.to_string())?)?);
            Ok(0)
        }
        "logs" => follow(&c, id(m)?),
        "cancel" => {
            let r = c.cancel(id(m)?).map_err(|e| e.to_string())?;
            println!("{}", pretty(&r)?);
            Ok(0)
        }
        "fetch" => {
            let name = m.get_one::<String>("name").ok_or("no file name")?;
            let bytes = c.file(id(m)?, name).map_err(|e| e.to_string())?;
            let out = m
                .get_one::<String>("output")
                .map_or_else(|| PathBuf::from(name), PathBuf::from);
            std::fs::write(&out, bytes)
                .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
            Ok(0)
        }
        _ => Err(format!("unknown command {name}")),
    }
}

fn submit(c: &Client, m: &ArgMatches) -> Result<i32, String> {
    let app = PathBuf::from(m.get_one::<String>("app").ok_or("no application given")?);
    let mut inputs = BTreeMap::new();
    for f in m.get_many::<String>("input").into_iter().flatten() {
        let path = PathBuf::from(f);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{f}: not a file name"))?
            .to_string();
        inputs.insert(name, read(&path)?);
    }
    let s = Submission {
        component: read(&app)?,
        name: app
            .file_stem()
            .map_or_else(|| "app".into(), |s| s.to_string_lossy().into_owned()),
        args: m
            .get_many::<String>("args")
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
        inputs,
    };
    let r = c.submit(&s).map_err(|e| e.to_string())?;
    if !m.get_flag("wait") {
        println!("{}", pretty(&r)?);
        return Ok(0);
    }
    eprintln!("weft: job {} queued", r.id);
    follow(c, r.id)
}

/// Prints a job's events as they come (output on standard output, the rest on standard
/// error); the job's exit status (1 where it did not exit).
fn follow(c: &Client, id: u64) -> Result<i32, String> {
    let mut stdout = std::io::stdout();
    c.events(id, FOLLOW, |kind, data| {
        let text = serde_json::from_str::<serde_json::Value>(data).ok();
        let as_str = text.as_ref().and_then(|v| v.as_str());
        match (kind, as_str) {
            ("stdout", Some(s)) => {
                let _ = stdout.write_all(s.as_bytes());
                let _ = stdout.flush();
            }
            ("stderr", Some(s)) => eprint!("{s}"),
            ("explain", Some(s)) => eprintln!("{s}"),
            ("state", _) => eprintln!("weft: job {id}: {data}"),
            _ => {}
        }
    })
    .map_err(|e| e.to_string())?;
    let r = c.job(id).map_err(|e| e.to_string())?;
    Ok(r.exit_status.unwrap_or(1))
}
