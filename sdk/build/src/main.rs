//! `weft-plugin-build`: compiles a plugin crate into a Wasm component.
//!
//! ```text
//! weft-plugin-build --manifest-path PATH [--package NAME] [--profile NAME]
//!                   [--target-dir DIR] [--offline] --out FILE
//! weft-plugin-build new DIR --name NAME
//! ```
//!
//! `new` writes a plugin crate from the SDK's template into `DIR` (see
//! `weft_plugin_build::new_plugin`).
//!
//! `--profile` names a profile the plugin's workspace defines; without it the plugin is built
//! with release settings for small code (see `weft_plugin_build::Profile::Small`). Exits
//! with 2 on a bad command line and 1 when the build fails.

use std::path::PathBuf;
use std::process::ExitCode;

use weft_plugin_build::{Build, Profile, ensure_wasm_target, new_plugin, package_name};

const USAGE: &str = "usage: weft-plugin-build --manifest-path PATH [--package NAME] \
                     [--profile NAME] [--target-dir DIR] [--offline] --out FILE\n       \
                     weft-plugin-build new DIR --name NAME";

struct Options {
    manifest: PathBuf,
    package: Option<String>,
    profile: Profile,
    target_dir: Option<PathBuf>,
    offline: bool,
    out: PathBuf,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut manifest, mut package, mut profile, mut target_dir, mut out) =
        (None, None, Profile::Small, None, None);
    let mut offline = false;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--manifest-path" => manifest = Some(PathBuf::from(value()?)),
            "--package" | "-p" => package = Some(value()?),
            "--profile" => profile = Profile::Named(value()?),
            "--target-dir" => target_dir = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--offline" => offline = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Options {
        manifest: manifest.ok_or("--manifest-path is required")?,
        package,
        profile,
        target_dir,
        offline,
        out: out.ok_or("--out is required")?,
    })
}

fn run(o: Options) -> Result<(), String> {
    let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    ensure_wasm_target(&std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .map_err(|e| e.to_string())?;
    let package = match o.package {
        Some(p) => p,
        None => package_name(&cargo, &o.manifest).map_err(|e| e.to_string())?,
    };
    let target_dir = o.target_dir.unwrap_or_else(|| {
        o.manifest
            .parent()
            .map_or_else(|| PathBuf::from("target"), |d| d.join("target"))
            .join("weft-plugin")
    });
    let build = Build {
        cargo,
        manifest: o.manifest,
        package,
        target_dir,
        profile: o.profile,
        offline: o.offline,
    };
    let component = build.component().map_err(|e| e.to_string())?;
    std::fs::write(&o.out, &component).map_err(|e| format!("{}: {e}", o.out.display()))?;
    println!(
        "{}: {} bytes, a component of {}",
        o.out.display(),
        component.len(),
        build.package
    );
    Ok(())
}

/// `new DIR --name NAME`.
fn new(mut args: impl Iterator<Item = String>) -> Result<(), (u8, String)> {
    let bad = |m: &str| (2, m.to_string());
    let dir = args.next().ok_or_else(|| bad("new needs a directory"))?;
    let (flag, name) = (args.next(), args.next());
    let name = match (flag.as_deref(), name) {
        (Some("--name"), Some(name)) => name,
        _ => return Err(bad("new needs --name NAME")),
    };
    if let Some(extra) = args.next() {
        return Err(bad(&format!("unknown argument `{extra}`")));
    }
    // This checkout's SDK: the crate directory's parent.
    let sdk = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = new_plugin(&PathBuf::from(&dir), &name, &sdk).map_err(|e| (1, e.to_string()))?;
    println!(
        "{dir}: a new plugin `{name}`; test it in the real host with\n    (cd {dir} && cargo test \
         --release)\nand build its component with\n    weft-plugin-build --manifest-path {} --out \
         {name}.component.wasm",
        manifest.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("new") {
        args.next();
        return match new(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err((code, e)) => {
                eprintln!("weft-plugin-build: {e}");
                if code == 2 {
                    eprintln!("{USAGE}");
                }
                ExitCode::from(code)
            }
        };
    }
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("weft-plugin-build: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft-plugin-build: {e}");
            ExitCode::FAILURE
        }
    }
}
