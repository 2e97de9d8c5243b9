//! `weft serve`: the service for tenants (see `weft-service` and `docs/service.md`).

use std::io::Write;
use std::path::PathBuf;

use clap::{Arg, ArgMatches, Command};
use weft_service::{Server, Service, ServiceConfig};

/// The `serve` subcommand's arguments.
pub fn command() -> Command {
    Command::new("serve")
        .about("Serves tenants' jobs over HTTP (see docs/service.md)")
        .arg(
            Arg::new("config")
                .long("config")
                .required(true)
                .value_name("FILE.toml")
                .help("tenants, tokens, quotas and the service's settings"),
        )
        .arg(
            Arg::new("listen")
                .long("listen")
                .value_name("ADDR")
                .help("the address to listen on, over the file's (127.0.0.1:0: a free port)"),
        )
        .arg(
            Arg::new("data-dir")
                .long("data-dir")
                .value_name("DIR")
                .help("where the job database and the jobs' files live, over the file's"),
        )
}

/// Serves until SIGINT or SIGTERM. The first line on standard output is JSON: the address
/// it listens on and what it recovered from the database.
pub fn main(m: &ArgMatches) -> Result<i32, String> {
    let path = PathBuf::from(m.get_one::<String>("config").ok_or("no --config given")?);
    let mut config = ServiceConfig::load(&path).map_err(|e| e.to_string())?;
    if let Some(l) = m.get_one::<String>("listen") {
        config.service.listen = l.clone();
    }
    if let Some(d) = m.get_one::<String>("data-dir") {
        config.service.data_dir = PathBuf::from(d);
    }
    // Under `mpirun` (a build with the `mpi` feature), rank 0 serves and every other rank
    // runs each job with it.
    let ranks = weft::Ranks::world().map_err(|e| e.to_string())?;
    if ranks.rank() > 0 {
        weft_service::follow(&config, &ranks).map_err(|e| e.to_string())?;
        return Ok(0);
    }
    let on_ranks = ranks.size() > 1;
    let (service, recovered) = Service::open(config).map_err(|e| e.to_string())?;
    let server = if on_ranks {
        Server::start_on_ranks(service)
    } else {
        Server::start(service)
    }
    .map_err(|e| e.to_string())?;
    let line = serde_json::json!({
        "listening": server.addr().to_string(),
        "requeued": recovered.requeued,
        "failed_by_restart": recovered.failed,
        "swept": recovered.swept,
        "blobs_swept": recovered.blobs_swept,
        "ranks": ranks.size(),
        "pid": std::process::id(),
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    if on_ranks {
        server.serve_on_ranks(&ranks)
    } else {
        server.serve()
    }
    .map_err(|e| e.to_string())?;
    Ok(0)
}
