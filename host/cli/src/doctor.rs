//! `weft doctor`: what this machine gives Weft, each with what to do when it is missing.

use std::path::Path;
use std::process::Command;

use clap::ArgMatches;
use weft::Config;
use weft_cpu::Compiler;

/// One check: what was looked at, what was found, and what to do where it is missing.
struct Check {
    name: &'static str,
    ok: bool,
    found: String,
    fix: Option<String>,
}

/// Prints the checks (text, or one JSON line with `--json`); status 0 whatever they find.
pub fn main(m: &ArgMatches) -> Result<i32, String> {
    let config = Config::from_env();
    let checks = vec![cpu(&config), threads(&config), gpu(), mpi(), cache(&config)];
    if m.get_flag("json") {
        let rows: Vec<serde_json::Value> = checks
            .iter()
            .map(|c| serde_json::json!({"check": c.name, "ok": c.ok, "found": c.found, "fix": c.fix}))
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        for c in &checks {
            println!(
                "{:8} {:4} {}",
                c.name,
                if c.ok { "ok" } else { "--" },
                c.found
            );
            if let Some(fix) = &c.fix {
                println!("              {fix}");
            }
        }
    }
    Ok(0)
}

fn cpu(config: &Config) -> Check {
    let (avx2, avx512) = (Compiler::avx2_detected(), Compiler::avx512_detected());
    let widest = if avx512 {
        "avx512"
    } else if avx2 {
        "avx2"
    } else {
        "sse"
    };
    let chosen = config
        .simd
        .map_or_else(|| widest.to_string(), |p| format!("{p:?}").to_lowercase());
    Check {
        name: "cpu",
        ok: true,
        found: format!("AVX2 {avx2}, AVX-512 {avx512}; SIMD path {chosen}"),
        fix: (!avx2).then(|| {
            "no AVX2: kernels run the 128-bit path (correct, slower); nothing to install".into()
        }),
    }
}

fn threads(config: &Config) -> Check {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // 0 asks for one worker per core.
    let workers = if config.threads == 0 {
        cores
    } else {
        config.threads
    };
    Check {
        name: "threads",
        ok: true,
        found: format!("{workers} worker threads on {cores} cores"),
        fix: None,
    }
}

fn gpu() -> Check {
    let listed = Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("libcuda.so"))
        .unwrap_or(false);
    let found = listed
        || [
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/usr/lib64/libcuda.so.1",
        ]
        .iter()
        .any(|p| Path::new(p).exists());
    Check {
        name: "gpu",
        ok: found,
        found: if found {
            "NVIDIA driver library (libcuda) found: `--device gpu` can run".into()
        } else {
            "no NVIDIA driver library (libcuda)".into()
        },
        fix: (!found).then(|| {
            "install the NVIDIA driver to run with `--device gpu`; the CPU needs nothing".into()
        }),
    }
}

fn mpi() -> Check {
    let version = Command::new("mpirun").arg("--version").output();
    match version {
        Ok(o) if o.status.success() => Check {
            name: "mpi",
            ok: true,
            found: String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("mpirun")
                .to_string(),
            fix: None,
        },
        _ => Check {
            name: "mpi",
            ok: false,
            found: "no `mpirun` on PATH".into(),
            fix: Some(
                "for several ranks install Open MPI (Debian: `apt-get install openmpi-bin \
                 libopenmpi-dev`); one process needs nothing"
                    .into(),
            ),
        },
    }
}

fn cache(config: &Config) -> Check {
    match &config.component_cache {
        None => Check {
            name: "cache",
            ok: false,
            found: "no cache directory (WEFT_CACHE=0, or no home directory)".into(),
            fix: Some("set WEFT_CACHE_DIR to a directory only you may write".into()),
        },
        Some(dir) => match weft_runtime::private_dir::private_dir(dir, "the cache") {
            Some(_) => Check {
                name: "cache",
                ok: true,
                found: format!("{} (private: only this user may write it)", dir.display()),
                fix: None,
            },
            None => Check {
                name: "cache",
                ok: false,
                found: format!(
                    "{} is not used: another user owns it or others may write it",
                    dir.display()
                ),
                fix: Some(format!(
                    "`chmod 700 {}`, or set WEFT_CACHE_DIR elsewhere",
                    dir.display()
                )),
            },
        },
    }
}
