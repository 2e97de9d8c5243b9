//! How a runtime is set up: [`Config`], and the one place where Weft reads its environment
//! variables ([`Config::from_env`]).

use std::path::PathBuf;

pub use weft_plugin::PluginLimits;

/// The configuration of a [`Runtime`](crate::Runtime).
#[derive(Clone, Debug)]
pub struct Config {
    /// Worker threads that run kernels (0: one per core).
    pub threads: usize,
    /// Points per launch that the host prefers (1 on one process; more splits arrays into
    /// more tiles, which tests use to check that results do not depend on partitioning).
    pub pieces: u64,
    /// Limits for plugins loaded without their own.
    pub plugin_limits: PluginLimits,
    /// Where compiled components are cached on disk (none: memory only).
    pub component_cache: Option<PathBuf>,
    /// The most tasks the window holds before it runs them (the window starts smaller and
    /// grows while whole windows fuse).
    pub window_bound: usize,
    /// Whether tasks are fused (`WEFT_FUSION=0` turns it off).
    pub fusion: bool,
    /// Whether fusion decisions are gathered for
    /// [`Runtime::take_explanations`](crate::Runtime::take_explanations).
    pub explain: bool,
    /// Whether fusion decisions are printed on standard error as they are taken.
    pub explain_to_stderr: bool,
    /// Where to write a trace (Chrome/Perfetto JSON, by `tracing-chrome`) of plugin calls,
    /// compiles and kernel runs, named by provenance, finished when the runtime is
    /// dropped (`WEFT_TRACE=FILE`).
    pub trace: Option<PathBuf>,
    /// The most bytes of freed store memory kept for reuse by new stores of the same size
    /// (`WEFT_POOL_BYTES`; 0 frees memory at once, as NumPy's arrays do).
    pub pool_bytes: u64,
    /// Whether the CPU back end may run vectorized loops in AVX-512 code where the CPU has it
    /// (`WEFT_AVX512=0` turns it off; the results are the same bits either way).
    pub avx512: bool,
    /// Whether compiling a kernel after [`Runtime::warmed_up`](crate::Runtime::warmed_up) is
    /// an error (`WEFT_FORBID_COMPILES_AFTER_WARMUP=1`).
    pub forbid_compiles_after_warmup: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            threads: 0,
            pieces: 1,
            plugin_limits: PluginLimits::default(),
            component_cache: default_cache_dir(),
            window_bound: 256,
            fusion: true,
            explain: false,
            explain_to_stderr: false,
            trace: None,
            pool_bytes: 1 << 30,
            avx512: true,
            forbid_compiles_after_warmup: false,
        }
    }
}

impl Config {
    /// The default configuration, changed by the environment:
    /// - `WEFT_THREADS`: worker threads;
    /// - `WEFT_PIECES`: points per launch;
    /// - `WEFT_CACHE_DIR`: the component cache directory, or `WEFT_CACHE=0` for none;
    /// - `WEFT_FUSION=0`: no fusion;
    /// - `WEFT_EXPLAIN=1`: print every fusion decision on standard error;
    /// - `WEFT_WINDOW`: the window's bound;
    /// - `WEFT_TRACE=FILE`: write a trace of plugin calls, compiles and kernel runs to FILE;
    /// - `WEFT_POOL_BYTES`: the most freed store memory kept for reuse (0: none);
    /// - `WEFT_AVX512=0`: no AVX-512 code in CPU kernels;
    /// - `WEFT_FORBID_COMPILES_AFTER_WARMUP=1`: compiling after the warm-up is an error.
    pub fn from_env() -> Config {
        let mut config = Config::default();
        if std::env::var("WEFT_FUSION").is_ok_and(|v| v.trim() == "0") {
            config.fusion = false;
        }
        if std::env::var("WEFT_EXPLAIN").is_ok_and(|v| v.trim() == "1") {
            config.explain_to_stderr = true;
        }
        if let Some(path) = std::env::var_os("WEFT_TRACE") {
            config.trace = Some(PathBuf::from(path));
        }
        if std::env::var("WEFT_AVX512").is_ok_and(|v| v.trim() == "0") {
            config.avx512 = false;
        }
        if std::env::var("WEFT_FORBID_COMPILES_AFTER_WARMUP").is_ok_and(|v| v.trim() == "1") {
            config.forbid_compiles_after_warmup = true;
        }
        if let Some(b) = env_number("WEFT_POOL_BYTES") {
            config.pool_bytes = b;
        }
        if let Some(w) = env_number("WEFT_WINDOW") {
            config.window_bound = (w as usize).max(1);
        }
        if let Some(t) = env_number("WEFT_THREADS") {
            config.threads = t as usize;
        }
        if let Some(p) = env_number("WEFT_PIECES") {
            config.pieces = p.max(1);
        }
        config
    }
}

impl Config {
    /// The runtime core's part of the configuration.
    pub fn core_settings(&self) -> weft_runtime::Settings {
        weft_runtime::Settings {
            pieces: self.pieces,
            window_bound: self.window_bound,
            explain: self.explain,
        }
    }

    /// The CPU back end's part of the configuration.
    pub fn cpu_options(&self) -> weft_cpu::CpuOptions {
        weft_cpu::CpuOptions {
            threads: self.threads,
            pool_bytes: self.pool_bytes,
            avx512: self.avx512,
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn default_cache_dir() -> Option<PathBuf> {
    if std::env::var("WEFT_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    if let Some(dir) = std::env::var_os("WEFT_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("weft"))
}
