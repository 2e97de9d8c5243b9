//! Builds a Weft plugin crate into a Wasm component: the library behind
//! `plugins/artifacts`' build script and the `weft-plugin-build` command, for plugins inside
//! this workspace and outside it.
//!
//! A plugin crate is an ordinary library crate (`crate-type = ["rlib"]` is fine) that depends
//! on `weft-sdk` and `wit-bindgen`. Building it means:
//! 1. `cargo rustc --lib --crate-type=cdylib --target=wasm32-unknown-unknown` with a profile
//!    for small code ([`Profile::Small`]: release, `opt-level = "s"`, no debug info, `panic =
//!    "abort"`; the crate stays an rlib for native builds of its workspace), in a target
//!    directory of its own (so a build script never waits on the outer build's lock);
//! 2. `wit-component`'s encoder turns the core module into a component.
//!
//! Plugins are found by their manifest's metadata:
//!
//! ```toml
//! [package.metadata.weft]
//! artifact = "STATS"   # the constant plugins/artifacts embeds it as
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target plugins are compiled for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// What can go wrong building a plugin.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command could not be started.
    #[error("cannot run {command}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran and failed.
    #[error("{0}")]
    Failed(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `cargo metadata` printed something this crate does not understand.
    #[error("cargo metadata: {0}")]
    Metadata(String),
    /// The core module could not be made into a component.
    #[error("cannot make a component of {package}: {message}")]
    Component {
        /// The package.
        package: String,
        /// What `wit-component` said.
        message: String,
    },
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The profile a plugin is compiled with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// A profile the plugin's workspace defines (this workspace's is `plugin`).
    Named(String),
    /// Release with `opt-level = "s"`, no debug info and `panic = "abort"`, set on the command
    /// line: right for a plugin whose workspace defines no profile of its own.
    Small,
}

impl Profile {
    /// The arguments that select the profile.
    fn args(&self) -> Vec<String> {
        match self {
            Profile::Named(name) => vec![format!("--profile={name}")],
            Profile::Small => [
                "--release",
                "--config=profile.release.opt-level=\"s\"",
                "--config=profile.release.debug=false",
                "--config=profile.release.strip=\"debuginfo\"",
                "--config=profile.release.panic=\"abort\"",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    /// The directory under `<target-dir>/<target>/` its outputs go to.
    fn dir(&self) -> &str {
        match self {
            Profile::Named(name) => name,
            Profile::Small => "release",
        }
    }
}

/// One plugin to build.
#[derive(Clone, Debug)]
pub struct Build {
    /// The `cargo` to run (a build script gets it from `CARGO`).
    pub cargo: PathBuf,
    /// The plugin's `Cargo.toml` (or its workspace's).
    pub manifest: PathBuf,
    /// The plugin's package name.
    pub package: String,
    /// Where the build's files go (keep it apart from an outer build's target directory).
    pub target_dir: PathBuf,
    /// The profile.
    pub profile: Profile,
    /// Whether cargo may not use the network (every dependency must be in its cache).
    pub offline: bool,
}

impl Build {
    /// Compiles the plugin to a core Wasm module and returns the module's path.
    pub fn core_module(&self) -> Result<PathBuf> {
        let mut cmd = Command::new(&self.cargo);
        cmd.args(["rustc", "--crate-type=cdylib", "--lib"])
            .arg(format!("--target={TARGET}"))
            .arg("--manifest-path")
            .arg(&self.manifest)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .args(["-p", &self.package])
            .args(self.profile.args());
        if self.offline {
            cmd.arg("--offline");
        }
        run_nested(cmd, "rustc", &self.cargo, &self.package, TARGET)?;
        Ok(self
            .target_dir
            .join(TARGET)
            .join(self.profile.dir())
            .join(format!("{}.wasm", self.package.replace('-', "_"))))
    }

    /// Compiles the plugin and returns the bytes of its component.
    pub fn component(&self) -> Result<Vec<u8>> {
        let core = self.core_module()?;
        let bytes = std::fs::read(&core).map_err(|source| Error::Io {
            path: core.clone(),
            source,
        })?;
        componentize(&self.package, &bytes)
    }
}

/// Runs a nested `cargo` (its `subcommand` building `package` for `target`), without the
/// outer build's flags, which are for the host, not for wasm.
fn run_nested(
    mut cmd: Command,
    subcommand: &str,
    cargo: &Path,
    package: &str,
    target: &str,
) -> Result<()> {
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().map_err(|source| Error::Spawn {
        command: format!("{} {subcommand}", cargo.display()),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Failed(format!(
            "building {package} for {target} failed ({status})"
        )))
    }
}

/// A core module that imports and exports the component model's canonical names (what
/// `wit-bindgen` emits) as a component.
pub fn componentize(package: &str, core: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(core)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| Error::Component {
            package: package.to_string(),
            message: format!("{e:#}"),
        })
}

/// A plugin package found by [`discover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginPackage {
    /// The package name.
    pub package: String,
    /// The constant it is embedded as (`[package.metadata.weft] artifact`).
    pub artifact: String,
    /// Its `Cargo.toml`.
    pub manifest: PathBuf,
}

/// The packages of the workspace of `manifest` whose metadata names an artifact, sorted by
/// artifact name (runs `cargo metadata --no-deps`).
pub fn discover(cargo: &Path, manifest: &Path) -> Result<Vec<PluginPackage>> {
    let mut found = Vec::new();
    for p in packages(cargo, manifest)? {
        let Some(artifact) = p["metadata"]["weft"]["artifact"].as_str() else {
            continue;
        };
        let (name, path) = name_and_manifest(&p)?;
        found.push(PluginPackage {
            package: name,
            artifact: artifact.to_string(),
            manifest: path,
        });
    }
    found.sort_by(|a, b| a.artifact.cmp(&b.artifact));
    Ok(found)
}

/// The name of the package whose manifest is `manifest`.
pub fn package_name(cargo: &Path, manifest: &Path) -> Result<String> {
    let wanted = manifest.canonicalize().map_err(|source| Error::Io {
        path: manifest.to_path_buf(),
        source,
    })?;
    for p in packages(cargo, manifest)? {
        let (name, path) = name_and_manifest(&p)?;
        if path.canonicalize().ok().as_ref() == Some(&wanted) {
            return Ok(name);
        }
    }
    Err(Error::Metadata(format!(
        "{} is not a package's manifest (a virtual workspace? name the package)",
        manifest.display()
    )))
}

fn name_and_manifest(p: &serde_json::Value) -> Result<(String, PathBuf)> {
    let name = p["name"]
        .as_str()
        .ok_or_else(|| Error::Metadata("a package without a name".into()))?;
    let path = p["manifest_path"]
        .as_str()
        .ok_or_else(|| Error::Metadata(format!("{name} has no manifest path")))?;
    Ok((name.to_string(), PathBuf::from(path)))
}

/// The workspace's packages, as `cargo metadata --no-deps` lists them.
fn packages(cargo: &Path, manifest: &Path) -> Result<Vec<serde_json::Value>> {
    let out = Command::new(cargo)
        .args(["metadata", "--format-version=1", "--no-deps", "--offline"])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .map_err(|source| Error::Spawn {
            command: format!("{} metadata", cargo.display()),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| Error::Metadata(e.to_string()))?;
    match json["packages"].take() {
        serde_json::Value::Array(list) => Ok(list),
        _ => Err(Error::Metadata("no `packages` list".into())),
    }
}

/// Makes sure the wasm target's standard library is installed for `rustc`, installing it
/// with rustup if it is not.
pub fn ensure_wasm_target(rustc: &str) -> Result<()> {
    ensure_target(rustc, TARGET)
}

/// Makes sure `target`'s standard library is installed for `rustc`, installing it with rustup
/// if it is not.
pub fn ensure_target(rustc: &str, target: &str) -> Result<()> {
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|source| Error::Spawn {
            command: rustc.to_string(),
            source,
        })?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib").join(target);
    if lib.exists() {
        return Ok(());
    }
    let installed = Command::new("rustup")
        .args(["target", "add", target])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if installed && lib.exists() {
        Ok(())
    } else {
        Err(Error::Failed(format!(
            "the {target} target is missing and could not be installed; run:\n    rustup target \
             add {target}"
        )))
    }
}

/// The target application components are compiled for: its binaries are components already.
pub const APP_TARGET: &str = "wasm32-wasip2";

/// The application components of one package to build: each of its binaries, for
/// [`APP_TARGET`].
#[derive(Clone, Debug)]
pub struct AppBuild {
    /// The `cargo` to run.
    pub cargo: PathBuf,
    /// The workspace's (or the package's) `Cargo.toml`.
    pub manifest: PathBuf,
    /// The package name.
    pub package: String,
    /// Where the build's files go.
    pub target_dir: PathBuf,
    /// The profile.
    pub profile: Profile,
}

impl AppBuild {
    /// Compiles every binary of the package and returns each one's name and component file.
    pub fn components(&self, bins: &[String]) -> Result<Vec<(String, PathBuf)>> {
        let mut cmd = Command::new(&self.cargo);
        cmd.arg("build")
            .arg(format!("--target={APP_TARGET}"))
            .arg("--manifest-path")
            .arg(&self.manifest)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .args(["-p", &self.package])
            .args(self.profile.args());
        for bin in bins {
            cmd.args(["--bin", bin]);
        }
        run_nested(cmd, "build", &self.cargo, &self.package, APP_TARGET)?;
        let dir = self.target_dir.join(APP_TARGET).join(self.profile.dir());
        Ok(bins
            .iter()
            .map(|b| (b.clone(), dir.join(format!("{b}.wasm"))))
            .collect())
    }
}

/// An application package found by [`discover_apps`]: its binaries become components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppPackage {
    /// The package name.
    pub package: String,
    /// Its binaries' names.
    pub bins: Vec<String>,
    /// Its `Cargo.toml`.
    pub manifest: PathBuf,
}

/// The packages of the workspace of `manifest` whose metadata says
/// `[package.metadata.weft] apps = true`, with their binaries, sorted by package name.
pub fn discover_apps(cargo: &Path, manifest: &Path) -> Result<Vec<AppPackage>> {
    let mut found = Vec::new();
    for p in packages(cargo, manifest)? {
        if p["metadata"]["weft"]["apps"].as_bool() != Some(true) {
            continue;
        }
        let (name, path) = name_and_manifest(&p)?;
        let mut bins: Vec<String> = p["targets"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .filter(|t| {
                        t["kind"]
                            .as_array()
                            .is_some_and(|k| k.iter().any(|k| k == "bin"))
                    })
                    .filter_map(|t| t["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        bins.sort();
        found.push(AppPackage {
            package: name,
            bins,
            manifest: path,
        });
    }
    found.sort_by(|a, b| a.package.cmp(&b.package));
    Ok(found)
}

/// The files of a new plugin crate made from the SDK's template (`sdk/template/`), with
/// `{{name}}`, `{{module}}` and `{{sdk}}` to fill in: (path in the crate, contents).
const TEMPLATE: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../template/Cargo.toml.in")),
    ("src/lib.rs", include_str!("../../template/src/lib.rs.in")),
    (
        "tests/plugin.rs",
        include_str!("../../template/tests/plugin.rs.in"),
    ),
    (
        "wit/plugin.wit",
        include_str!("../../template/wit/plugin.wit.in"),
    ),
    // The weft:plugin package the plugin's world includes.
    (
        "wit/deps/weft-plugin/weft.wit",
        include_str!("../../../wit/weft.wit"),
    ),
];

/// Writes a new plugin crate named `name` (lowercase letters, digits and `-`, starting with a
/// letter) into `dir`, from the SDK's template: one element-wise operation (`scale`), one
/// reduction (`total`), a test that runs them in the real host, its WIT, and the `weft:plugin` WIT it depends on. The crate depends
/// on the SDK at `sdk` (this checkout's `sdk/` directory). Returns the crate's manifest.
pub fn new_plugin(dir: &Path, name: &str, sdk: &Path) -> Result<PathBuf> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !valid {
        return Err(Error::Failed(format!(
            "`{name}` is not a plugin name: use lowercase letters, digits and single dashes, \
             starting with a letter"
        )));
    }
    if dir.join("Cargo.toml").exists() {
        return Err(Error::Failed(format!(
            "{} already holds a crate",
            dir.display()
        )));
    }
    let sdk = sdk.canonicalize().map_err(|source| Error::Io {
        path: sdk.to_path_buf(),
        source,
    })?;
    let sdk = sdk.to_string_lossy().replace('\\', "/");
    for (file, text) in TEMPLATE {
        let path = dir.join(file);
        let text = text
            .replace("{{name}}", name)
            .replace("{{module}}", &name.replace('-', "_"))
            .replace("{{sdk}}", &sdk);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| Error::Io { path, source })?;
    }
    Ok(dir.join("Cargo.toml"))
}
