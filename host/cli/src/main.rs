//! `weft`: runs application components, inspects components, and checks what this machine
//! gives Weft.
//!
//! - `weft run APP.wasm [--plugin P.wasm]... [--threads N] [--dir DIR] [--device cpu|gpu]
//!   [--time-limit SECONDS] [--memory-mb MB] -- ARGS`: runs an application component in its
//!   sandbox, with the first-party `numeric` and `sparse` plugins (and any `--plugin`) serving
//!   its imports; a progress line on a terminal, then one JSON summary line on standard
//!   error; exits with the application's status.
//! - `weft inspect COMPONENT.wasm`: the contract version, imports and exports of a component,
//!   and for a plugin its name and version.
//! - `weft doctor`: the CPU's features and the SIMD path chosen, threads, GPU driver, MPI,
//!   and the cache directory, each with what to do when something is missing.
//! - `weft serve --config FILE.toml`: the service for tenants (`docs/service.md`); `weft
//!   submit|status|logs|cancel|fetch`: a tenant's commands against it.

mod doctor;
mod inspect;
mod remote;
mod run;
mod serve;

use clap::{Arg, ArgAction, Command};

fn command() -> Command {
    Command::new("weft")
        .about("Runs Weft application components, inspects components, checks this machine")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(run::command())
        .subcommand(serve::command())
        .subcommands(remote::commands())
        .subcommand(
            Command::new("inspect")
                .about("Shows a component's contract version, imports and exports")
                .arg(
                    Arg::new("component")
                        .required(true)
                        .value_name("COMPONENT.wasm"),
                ),
        )
        .subcommand(
            Command::new("doctor")
                .about("Checks the CPU, threads, GPU, MPI and cache directory Weft would use")
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("one JSON line instead of text"),
                ),
        )
}

fn main() {
    let matches = command().get_matches();
    let code = match matches.subcommand() {
        Some(("run", m)) => run::main(m),
        Some(("inspect", m)) => inspect::main(m),
        Some(("doctor", m)) => doctor::main(m),
        Some(("serve", m)) => serve::main(m),
        Some((name @ ("submit" | "status" | "logs" | "cancel" | "fetch"), m)) => {
            remote::main(name, m)
        }
        _ => Err("an unknown command (see `weft --help`)".to_string()),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(message) => {
            eprintln!("weft: {message}");
            std::process::exit(2);
        }
    }
}
