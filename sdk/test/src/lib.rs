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
//! release profile of `weft-plugin-build`, into `wasm-plugin-test/` beside the test's own
//! target directory), starts a runtime with two threads and fusion explanations on, and
//! loads numeric and the plugin into it.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

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
    /// `env!("CARGO_MANIFEST_DIR")`) and loads it beside numeric, in a runtime with two
    /// threads and fusion explanations on.
    pub fn build(manifest_dir: impl AsRef<Path>) -> Result<PluginTest> {
        let config = Config {
            threads: 2,
            component_cache: None,
            explain: true,
            ..Config::default()
        };
        PluginTest::build_with(manifest_dir, config)
    }

    /// [`PluginTest::build`], in a runtime with this configuration.
    pub fn build_with(manifest_dir: impl AsRef<Path>, config: Config) -> Result<PluginTest> {
        let component = build_component(manifest_dir.as_ref())?;
        PluginTest::load(&component, config)
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
    /// the only export of that name, in any interface.
    pub fn export(&self, function: &str) -> Result<&str> {
        let mut found = self
            .exports
            .iter()
            .filter(|e| e.rsplit('#').next() == Some(function));
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

    /// Calls the plugin's function `function` (a short name, or `"interface#function"`), which
    /// returns `result<T, error>`, and returns `T`. A plugin's error comes back as the host's
    /// error, naming the plugin and the call.
    pub fn call(&self, function: &str, args: &[Value]) -> Result<Value> {
        let name = if function.contains('#') {
            function
        } else {
            self.export(function)?
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

    /// The fusion explanations written since the last call (`WEFT_EXPLAIN`'s text).
    pub fn explanations(&self) -> String {
        self.numeric.runtime(|rt| rt.take_explanations()).join("")
    }

    /// Whether, in the explanations since the last call, a task of this plugin's kernel `key`
    /// fused with a task of numeric's.
    pub fn fused_with_numeric(&self, key: &str) -> bool {
        let kernel = format!("{}.{key}", self.name);
        self.explanations().split("weft fusion:").any(|block| {
            block.contains(&kernel) && block.contains("numeric.") && block.contains("fused")
        })
    }
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

/// The target directory of the running test (the test binary lies in
/// `<target>/<profile>/deps/`), or the crate's `target/`.
fn target_dir(manifest_dir: &Path) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| manifest_dir.join("target"))
}
