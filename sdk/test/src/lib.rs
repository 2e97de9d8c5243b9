//! The SDK's test harness: a plugin's own tests run it in the real host, beside the numeric
//! plugin, and compare what it computes with plain Rust.
//!
//! ```no_run
//! use weft_plugin_test::{DType, PluginTest, Value};
//!
//! let t = PluginTest::build(env!("CARGO_MANIFEST_DIR")).expect("the plugin builds and loads");
//! let np = t.numeric();
//! let x = np.linspace(0.0, 1.0, 11, DType::F64);
//! let y = t
//!     .call_array("scale", &[Value::try_from(&x).unwrap(), 2.0.into()], DType::F64, &[11])
//!     .expect("scale runs");
//! assert_eq!(y.to_vec().unwrap()[10], 2.0);
//! ```
//!
//! [`PluginTest::build`] compiles the crate in the given directory to a component (the small
//! release profile of `weft-plugin-build`, into `wasm-plugin-test/` in the test's own target
//! directory; once per test binary, see [`PluginTest::component`]), starts a runtime
//! configured by [`PluginTest::config`] (the environment's `WEFT_*` variables, two threads,
//! fusion explanations gathered), and loads numeric and the plugin into it.
//!
//! Functions are named as the plugin's WIT names them (`box-blur`) or as its Rust `Guest`
//! trait does (`box_blur`): both are the same export.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use weft::{self, Array, Config, DType, Numeric, PluginId, Value};
use weft_plugin_build::{Build, Profile, ensure_wasm_target, package_name};

/// What can go wrong in a plugin's test harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin did not build.
    #[error("building the plugin: {0}")]
    Build(#[from] weft_plugin_build::Error),
    /// The host refused the plugin, or a call failed (the error names the plugin and call).
    #[error(transparent)]
    Weft(#[from] weft::Error),
    /// The plugin exports no function of this name, or several.
    #[error("plugin `{plugin}`: {message}")]
    Export {
        /// The plugin.
        plugin: String,
        /// What was wrong with the name.
        message: String,
    },
}

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A plugin loaded beside numeric in a fresh runtime, ready to be called by its functions'
/// short names.
pub struct PluginTest {
    numeric: Numeric,
    plugin: PluginId,
    name: String,
    exports: Vec<String>,
}

impl PluginTest {
    /// Builds the plugin crate whose `Cargo.toml` is in `manifest_dir` (a test passes
    /// `env!("CARGO_MANIFEST_DIR")`) and loads it beside numeric, in a runtime configured by
    /// [`PluginTest::config`].
    pub fn build(manifest_dir: impl AsRef<Path>) -> Result<PluginTest> {
        PluginTest::build_with(manifest_dir, PluginTest::config())
    }

    /// [`PluginTest::build`], in a runtime with this configuration (start from
    /// [`PluginTest::config`] to keep the environment's settings and the explanations).
    pub fn build_with(manifest_dir: impl AsRef<Path>, config: Config) -> Result<PluginTest> {
        let component = PluginTest::component(manifest_dir)?;
        PluginTest::load(&component, config)
    }

    /// The configuration [`PluginTest::build`] uses: [`Config::from_env`], so `WEFT_PIECES`,
    /// `WEFT_FUSION`, `WEFT_EXPLAIN=1` (explanations printed on standard error, which the test
    /// runner shows for a failing test, or for all with `--nocapture`) and the others apply,
    /// with explanations also gathered for [`PluginTest::explanations`] and
    /// [`PluginTest::fused_with_numeric`], two worker threads unless `WEFT_THREADS` asks for
    /// a number, and no component cache on disk.
    pub fn config() -> Config {
        harness_config(Config::from_env())
    }

    /// The component built from the crate in `manifest_dir`: built on the first call of the
    /// test binary (the first [`PluginTest::build`]), and the same bytes for every later call
    /// with that directory. Tests running at once wait for the one build rather than start
    /// their own.
    ///
    /// This is a cache, the only state the harness keeps across calls: a process-wide map
    /// from the canonical manifest directory to the built bytes, filled once per directory
    /// and never changed after (a failed build is not kept, so the next call tries again).
    pub fn component(manifest_dir: impl AsRef<Path>) -> Result<Arc<[u8]>> {
        let dir = manifest_dir.as_ref();
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        built_once(&key, || build_component(dir))
    }

    /// Loads an already built component beside numeric, in a runtime with this configuration.
    pub fn load(component: &[u8], config: Config) -> Result<PluginTest> {
        let numeric = Numeric::new(weft::Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
        let (plugin, name, exports) = numeric.runtime(|rt| -> Result<_> {
            let plugin = rt.load(component)?;
            let name = rt.plugin_name(plugin);
            Ok((plugin, name, rt.exports(plugin)?))
        })?;
        Ok(PluginTest {
            numeric,
            plugin,
            name,
            exports,
        })
    }

    /// The numeric plugin, to make inputs and to read results.
    pub fn numeric(&self) -> &Numeric {
        &self.numeric
    }

    /// The plugin's id in the runtime.
    pub fn plugin(&self) -> PluginId {
        self.plugin
    }

    /// The plugin's name (from its `plugin.name` export).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The full name of the exported function `function` (`"interface#function"`): it must be
    /// the only export of that name, in any interface. `function` is the WIT name
    /// (`box-blur`) or the Rust one (`box_blur`, as the `Guest` trait spells it).
    pub fn export(&self, function: &str) -> Result<&str> {
        let wit = wit_name(function);
        let mut found = self
            .exports
            .iter()
            .filter(|e| e.rsplit('#').next() == Some(wit.as_str()));
        match (found.next(), found.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => Err(self.export_error(format!(
                "exports no function `{function}` (it exports {})",
                self.exports.join(", ")
            ))),
            (Some(a), Some(b)) => Err(self.export_error(format!(
                "exports `{function}` more than once ({a}, {b}): call it by its full name"
            ))),
        }
    }

    fn export_error(&self, message: String) -> Error {
        Error::Export {
            plugin: self.name.clone(),
            message,
        }
    }

    /// Calls the plugin's function `function` (a short name, WIT's `box-blur` or Rust's
    /// `box_blur`, or `"interface#function"`), which returns `result<T, error>`, and returns
    /// `T`. A plugin's error comes back as the host's error, naming the plugin and the call.
    pub fn call(&self, function: &str, args: &[Value]) -> Result<Value> {
        let full;
        let name = match function.rsplit_once('#') {
            Some((interface, f)) => {
                full = format!("{interface}#{}", wit_name(f));
                full.as_str()
            }
            None => self.export(function)?,
        };
        let value = self
            .numeric
            .runtime(|rt| rt.invoke(self.plugin, name, args))?;
        value.ok_or_else(|| self.export_error(format!("`{name}` returned nothing")))
    }

    /// [`PluginTest::call`] for a function that returns a store, as a numeric array of this
    /// dtype and shape (both checked).
    pub fn call_array(
        &self,
        function: &str,
        args: &[Value],
        dtype: DType,
        shape: &[u64],
    ) -> Result<Array> {
        let value = self.call(function, args)?;
        Ok(self.numeric.from_value(value, dtype, shape)?)
    }

    /// The fusion explanations written since the last call (`WEFT_EXPLAIN`'s text), and taken:
    /// the next call returns only newer ones.
    pub fn explanations(&self) -> String {
        self.numeric.runtime(|rt| rt.take_explanations()).join("")
    }

    /// Whether, in the explanations since the last call (which it takes, as
    /// [`PluginTest::explanations`] does), a task of this plugin's kernel `key` fused with a
    /// task of numeric's. `key` is the key as the plugin writes it (`box_blur.dtype=f64`), or
    /// its start (`box_blur`, for any dtype).
    pub fn fused_with_numeric(&self, key: &str) -> bool {
        fused(
            &self.explanations(),
            &format!("{}.{key}", self.name),
            "numeric.",
        )
    }
}

/// Whether `explanations` ([`PluginTest::explanations`]' text) show a task whose kernel name
/// starts with `a` fused with one whose name starts with `b`: both listed in the block of one
/// run prefix. Kernel names are the plugin's name and the key: `fused(&text,
/// "stats.box_blur", "numeric.binary")`.
pub fn fused(explanations: &str, a: &str, b: &str) -> bool {
    explanations.split("weft fusion:").any(|block| {
        // The block's tasks, one `  - <kernel>` line each.
        let tasks: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("  - "))
            .map(str::trim)
            .collect();
        tasks.iter().any(|t| t.starts_with(a)) && tasks.iter().any(|t| t.starts_with(b))
    })
}

/// The settings the harness puts on `config`: explanations gathered, two threads where
/// `config` leaves the count to the machine (0), no component cache on disk.
fn harness_config(config: Config) -> Config {
    Config {
        threads: if config.threads == 0 {
            2
        } else {
            config.threads
        },
        component_cache: None,
        explain: true,
        ..config
    }
}

/// A WIT function name for `name`: Rust's snake case (`box_blur`) in WIT's kebab case
/// (`box-blur`). WIT names hold no `_`, so a WIT name is unchanged.
fn wit_name(name: &str) -> String {
    name.replace('_', "-")
}

/// The value `build` makes for `key`, made once per process: a later call with the same key
/// gets the same bytes, and calls at once wait for the one that builds. A failure is returned
/// and not kept.
fn built_once(key: &Path, build: impl FnOnce() -> Result<Vec<u8>>) -> Result<Arc<[u8]>> {
    type Slot = Arc<Mutex<Option<Arc<[u8]>>>>;
    static BUILT: OnceLock<Mutex<HashMap<PathBuf, Slot>>> = OnceLock::new();
    let slot = {
        let mut map = BUILT
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(key.to_path_buf()).or_default().clone()
    };
    // A test that panicked while building leaves the slot empty: the next builds again.
    let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(bytes) = slot.as_ref() {
        return Ok(bytes.clone());
    }
    let bytes: Arc<[u8]> = build()?.into();
    *slot = Some(bytes.clone());
    Ok(bytes)
}

/// Builds the crate in `manifest_dir` into a component.
fn build_component(manifest_dir: &Path) -> Result<Vec<u8>> {
    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let manifest = manifest_dir.join("Cargo.toml");
    ensure_wasm_target(&std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))?;
    let package = package_name(&cargo, &manifest)?;
    let build = Build {
        cargo,
        manifest,
        package,
        target_dir: target_dir(manifest_dir).join("wasm-plugin-test"),
        profile: Profile::Small,
        offline: std::env::var_os("CARGO_NET_OFFLINE").is_some_and(|v| v == "true"),
    };
    Ok(build.component()?)
}

/// The target directory of the running test: the folder above the test binary that cargo
/// tagged (`CACHEDIR.TAG`), or else the one the binary's place names
/// (`<target>/<profile>/deps/<binary>`), or else the crate's `target/`.
fn target_dir(manifest_dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().ok();
    let tagged = exe.as_deref().and_then(|exe| {
        exe.ancestors()
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
    });
    let by_place = || {
        let deps = exe.as_deref()?.parent()?;
        (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(Path::to_path_buf))?
    };
    tagged
        .or_else(by_place)
        .unwrap_or_else(|| manifest_dir.join("target"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn rust_names_are_wit_names_in_snake_case() {
        assert_eq!(wit_name("box_blur"), "box-blur");
        assert_eq!(wit_name("box-blur"), "box-blur");
        assert_eq!(wit_name("scale"), "scale");
    }

    #[test]
    fn the_harness_keeps_the_environments_settings_and_adds_its_own() {
        let from_env = Config {
            pieces: 3,
            fusion: false,
            explain_to_stderr: true,
            threads: 0,
            ..Config::default()
        };
        let c = harness_config(from_env);
        assert_eq!((c.pieces, c.fusion, c.explain_to_stderr), (3, false, true));
        assert!(c.explain, "explanations gathered for `fused_with_numeric`");
        assert_eq!((c.threads, c.component_cache), (2, None));
        let c = harness_config(Config {
            threads: 5,
            ..Config::default()
        });
        assert_eq!(c.threads, 5, "WEFT_THREADS kept");
    }

    #[test]
    fn a_component_is_built_once_per_directory_and_process() {
        static BUILDS: AtomicUsize = AtomicUsize::new(0);
        let build = || {
            BUILDS.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            Ok(vec![0, 97, 115, 109])
        };
        // Four tests at once: one builds, the others wait for it and get its bytes.
        let dir = Path::new("/no/such/plugin/for/the/cache/test");
        let got: Vec<Arc<[u8]>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| built_once(dir, build).expect("built")))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect()
        });
        assert_eq!(BUILDS.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|b| Arc::ptr_eq(b, &got[0])));
        // Another directory is built on its own.
        let other = built_once(Path::new("/no/such/other/plugin"), build).expect("built");
        assert_eq!(BUILDS.load(Ordering::SeqCst), 2);
        assert!(!Arc::ptr_eq(&other, &got[0]));
        // A failed build is not kept: the next call builds again.
        let failing = Path::new("/no/such/failing/plugin");
        let fail = || Err(weft_plugin_build::Error::Failed("no".into()).into());
        assert!(built_once(failing, fail).is_err());
        assert!(built_once(failing, build).is_ok());
        assert_eq!(BUILDS.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn fused_finds_two_kernels_in_the_block_of_one_prefix() {
        let text = "weft fusion: 1 task(s) run alone\n  - numeric.binary.mul.f64.r2.as\n  \
                    cut before stats.box_blur.dtype=f64: true dependence on store 2\n\
                    weft fusion: 2 task(s) fused\n  - stats.box_blur.dtype=f64\n  \
                    - numeric.binary.add.f64.r2.as\n  the whole window fused\n";
        assert!(fused(text, "stats.box_blur", "numeric.binary.add"));
        assert!(fused(text, "stats.box_blur.dtype=f64", "numeric."));
        // The producer ran alone: a cut that names the blur is not a fusion with it.
        assert!(!fused(text, "stats.box_blur", "numeric.binary.mul"));
        assert!(!fused(text, "stats.mean", "numeric."));
    }
}
