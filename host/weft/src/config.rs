//! How a runtime is set up: [`Config`], and the one place where Weft reads its environment
//! variables ([`Config::from_env`]).

use std::ffi::OsString;
use std::path::PathBuf;

pub use weft_plugin::PluginLimits;

/// The machine that holds a runtime's stores and runs its kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The CPU back end: Cranelift code on worker threads (the default).
    #[default]
    Cpu,
    /// The GPU back end: PTX on the first NVIDIA GPU, through the CUDA driver (needs the
    /// `cuda` feature, on by default, and a driver at run time).
    Gpu,
    /// A test device, not a product one: the GPU back end on a simulated GPU, an
    /// interpreter of its PTX on the host ([`weft_ptx::sim`]). The same launcher, module
    /// cache and reductions as [`Device::Gpu`], with every PTX instruction run as the GPU
    /// would; it is slow, and exists so that tests cover the GPU back end where no GPU is.
    Sim,
}

impl Device {
    /// Parses `cpu`, `gpu` or `sim`.
    pub fn from_name(name: &str) -> Option<Device> {
        match name.trim() {
            "cpu" => Some(Device::Cpu),
            "gpu" => Some(Device::Gpu),
            "sim" => Some(Device::Sim),
            _ => None,
        }
    }

    /// `cpu`, `gpu` or `sim`.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
            Device::Sim => "sim",
        }
    }
}

/// The configuration of a [`Runtime`](crate::Runtime).
#[derive(Clone, Debug)]
pub struct Config {
    /// Where stores live and kernels run (`WEFT_DEVICE=cpu|gpu`, or `sim` in tests).
    pub device: Device,
    /// Whether every kernel the runtime prepares is also emitted as PTX and assembled by
    /// `ptxas` (`WEFT_PTX_CHECK=1`; `weft_ptx::ptxas::find` says where `ptxas` is): the GPU
    /// back end's code, checked on a machine without a GPU. A kernel that fails fails its
    /// task with the reason.
    pub ptx_check: bool,
    /// Worker threads that run kernels (0: one per core).
    pub threads: usize,
    /// A pool of workers shared with other runtimes (tenants): each runtime keeps its own
    /// plugins, stores, quotas and kernel time limit, and the pool serves their launches
    /// first come, first served (see [`weft_cpu::WorkerPool`]). `None`: a pool of `threads`
    /// workers of the runtime's own.
    pub pool: Option<weft_cpu::WorkerPool>,
    /// Points per launch that the host prefers (1 on one process; more splits arrays into
    /// more tiles, which tests use to check that results do not depend on partitioning).
    pub pieces: u64,
    /// Limits for plugins loaded without their own.
    pub plugin_limits: PluginLimits,
    /// The runtime's own limits: launch points, task arguments, its quota of store bytes (the
    /// tenant's, all plugins and the application together) and kernel time per launch
    /// (`WEFT_STORE_QUOTA`, `WEFT_KERNEL_TIME_MS`).
    pub limits: weft_runtime::Limits,
    /// Where compiled components are cached on disk, and under its `kernels` directory the
    /// compiled functions of kernels (none: memory only).
    pub component_cache: Option<PathBuf>,
    /// The most tasks the window holds before it runs them (the window starts smaller and
    /// grows while whole windows fuse).
    pub window_bound: usize,
    /// Whether tasks are fused (`WEFT_FUSION=0` turns it off).
    pub fusion: bool,
    /// Whether fusion decisions are gathered in full (as `WEFT_EXPLAIN=2` prints them) for
    /// [`Runtime::take_explanations`](crate::Runtime::take_explanations).
    pub explain: bool,
    /// Whether summaries of the window's runs (as `WEFT_EXPLAIN=1` prints them) are gathered
    /// for [`Runtime::take_summaries`](crate::Runtime::take_summaries).
    pub summarize: bool,
    /// Whether fusion decisions are printed on standard error as they are taken
    /// (`WEFT_EXPLAIN=1`): a summary of each run of the window, in the application's terms
    /// (how many tasks ran as how many, how many loops a fused task runs and which did not
    /// merge, why the window was cut, with the call sites of the application's calls where
    /// they are known; a run summarized alike before is counted, not shown again), or every
    /// decision in full with [`Config::explain_detail`].
    pub explain_to_stderr: bool,
    /// With [`Config::explain_to_stderr`], whether every decision is printed in full, in the
    /// terms of the fusion constraints and the kernel passes, as
    /// [`Runtime::take_explanations`](crate::Runtime::take_explanations) gives them
    /// (`WEFT_EXPLAIN=2`), rather than the summaries.
    pub explain_detail: bool,
    /// Whether the time of every kernel run is added up per kernel
    /// ([`Runtime::profile`](crate::Runtime::profile)) and printed on standard error as a
    /// table of the kernels with the most time when the runtime is dropped
    /// (`WEFT_PROFILE=1`). Each task then waits for its kernel to finish (on the GPU,
    /// launches no longer overlap).
    pub profile: bool,
    /// Where to write a trace (Chrome/Perfetto JSON, by `tracing-chrome`) of plugin calls,
    /// compiles and kernel runs, named by provenance, finished when the runtime is
    /// dropped (`WEFT_TRACE=FILE`).
    pub trace: Option<PathBuf>,
    /// The most bytes of freed store memory kept for reuse by new stores of the same size
    /// (`WEFT_POOL_BYTES`; 0 frees memory at once, as NumPy's arrays do).
    pub pool_bytes: u64,
    /// Whether the CPU back end's buffers of 2 MiB or more ask for transparent huge pages
    /// (`WEFT_HUGE_PAGES=0` turns it off).
    pub huge_pages: bool,
    /// The most blocks the GPU back end's launches ask for (`WEFT_GPU_BLOCKS` for 1-D grids,
    /// `WEFT_GPU_ROWS_BLOCKS` for the 2-D grids of rank-2 loops); results do not depend on
    /// them. For measuring other grids than the defaults.
    pub gpu_grid: weft_ptx::GridCaps,
    /// The CPU back end's code path for vectorized loops (`None`: the widest the CPU runs):
    /// `WEFT_SIMD=scalar|sse|avx2|avx512` (`WEFT_AVX512=0` is `sse`): scalar code, 128-bit
    /// vectors, or 128-bit vectors with AVX2 or AVX-512 bodies for the loops those take. A
    /// path the CPU cannot run makes [`Runtime::new`](crate::Runtime::new) fail with an error
    /// that says which paths it can.
    pub simd: Option<weft_cpu::SimdPath>,
    /// Whether the CPU back end's scalar `for` loops prefetch the streams they read
    /// (`WEFT_PREFETCH=0` turns it off; see `weft_cpu::Compiler::set_prefetch`).
    pub prefetch: bool,
    /// Problems found reading the environment (a value a variable cannot take), which make
    /// [`Runtime::new`](crate::Runtime::new) fail naming the variable.
    pub env_errors: Vec<String>,
    /// Whether compiling a kernel after [`Runtime::warmed_up`](crate::Runtime::warmed_up) is
    /// an error (`WEFT_FORBID_COMPILES_AFTER_WARMUP=1`).
    pub forbid_compiles_after_warmup: bool,
    /// The ranks the program runs on (`None`: this process alone). With more than one, every
    /// rank runs the same program, runs the points it owns, and at least one piece per rank.
    pub ranks: Option<Ranks>,
    /// On several ranks, whether every task's plan is compared across ranks before it runs
    /// (`WEFT_CHECK_REPLICATION=1`): a difference stops the job naming the first task that
    /// differs.
    pub check_replication: bool,
    /// How dense products are laid over the ranks (`WEFT_MATMUL_GRID`: `auto`, `rows`, `RxC`
    /// or `RxCxL`; see `weft_runtime::products`).
    pub matmul_grid: weft_runtime::products::ProductGrid,
    /// The bytes a rank may hold for one dense product's grid (`WEFT_RANK_MEMORY`; `None`:
    /// this machine's memory shared by the ranks), which decides whether a grid of layers may
    /// run (see `weft_runtime::products::choose`).
    pub rank_memory: Option<u64>,
}

/// The ranks of a job (from [`Ranks::world`]): each process runs the same program on its own
/// rank, and the runtime moves what crosses ranks (`weft_dist`).
#[derive(Clone)]
pub struct Ranks(pub std::rc::Rc<dyn weft_dist::comm::Comm>);

impl std::fmt::Debug for Ranks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ranks(rank {} of {})", self.0.rank(), self.0.size())
    }
}

impl PartialEq for Ranks {
    /// The same job's ranks.
    fn eq(&self, other: &Ranks) -> bool {
        std::rc::Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Ranks {
    /// The job's ranks: MPI's world when Weft is built with `weft-dist/mpi` (one rank when
    /// started without `mpirun`), else this process alone. Call it once per process.
    pub fn world() -> crate::Result<Ranks> {
        weft_dist::world()
            .map(Ranks)
            .map_err(|e| crate::Error::Usage(e.to_string()))
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.0.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// Ends every rank of the job with `code` (after an error on this one).
    pub fn abort(&self, code: i32) -> ! {
        self.0.abort(code)
    }

    /// The same ranks for one job of several that share these processes (a service's): a
    /// communicator of the job's own, on which a stop of the job on one rank (its `cancel`,
    /// its `deadline`, a failure) reaches the others instead of leaving them waiting (see
    /// `weft_dist::comm`). Collective: every rank calls it at the same point of the job.
    pub fn for_job(
        &self,
        cancel: std::sync::Arc<crate::CancelToken>,
        deadline: Option<std::time::Instant>,
    ) -> crate::Result<Ranks> {
        self.0
            .for_job(weft_dist::comm::JobStop { cancel, deadline })
            .map(Ranks)
            .map_err(|e| crate::Error::Usage(e.to_string()))
    }

    /// This rank's part of the job stopped, for `why`: the other ranks are told (a job's
    /// ranks, from [`Ranks::for_job`]; false for others, which cannot be).
    pub fn stop(&self, why: &str) -> bool {
        self.0.stop(why)
    }

    /// Why the job stopped here or on another rank that told, if it did (without waiting).
    pub fn stopped(&self) -> Option<String> {
        self.0.stopped()
    }

    /// The end of this rank's part of the job, with `outcome` (empty for success): rank 0
    /// gets every rank's, in rank order; the others, nothing. See `weft_dist::comm::Comm::finish`.
    pub fn finish(&self, outcome: &str) -> crate::Result<Vec<String>> {
        self.0
            .finish(outcome)
            .map_err(|e| crate::Error::Usage(e.to_string()))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            device: Device::Cpu,
            ptx_check: false,
            threads: 0,
            pool: None,
            pieces: 1,
            plugin_limits: PluginLimits::default(),
            limits: weft_runtime::Limits::default(),
            component_cache: default_cache_dir(),
            window_bound: 256,
            fusion: true,
            explain: false,
            summarize: false,
            explain_to_stderr: false,
            explain_detail: false,
            profile: false,
            trace: None,
            pool_bytes: 1 << 30,
            huge_pages: true,
            gpu_grid: weft_ptx::GridCaps::default(),
            simd: None,
            prefetch: true,
            env_errors: Vec::new(),
            forbid_compiles_after_warmup: false,
            ranks: None,
            check_replication: false,
            matmul_grid: weft_runtime::products::ProductGrid::default(),
            rank_memory: None,
        }
    }
}

impl Config {
    /// The default configuration, changed by the environment:
    /// - `WEFT_THREADS`: worker threads;
    /// - `WEFT_PIECES`: points per launch;
    /// - `WEFT_CACHE_DIR`: the component cache directory, or `WEFT_CACHE=0` for none;
    /// - `WEFT_FUSION=0`: no fusion;
    /// - `WEFT_EXPLAIN=1`: print a summary of each run of the window on standard error
    ///   (`WEFT_EXPLAIN=2`: every fusion decision in full; another value than 0, 1 or 2 is an
    ///   error when the runtime starts);
    /// - `WEFT_PROFILE=1`: time every kernel run and print the kernels with the most time on
    ///   standard error when the runtime is dropped;
    /// - `WEFT_WINDOW`: the window's bound;
    /// - `WEFT_TRACE=FILE`: write a trace of plugin calls, compiles and kernel runs to FILE;
    /// - `WEFT_POOL_BYTES`: the most freed store memory kept for reuse (0: none);
    /// - `WEFT_HUGE_PAGES=0`: large buffers do not ask for transparent huge pages;
    /// - `WEFT_PREFETCH=0`: the CPU back end's loops do not prefetch;
    /// - `WEFT_SIMD=scalar|sse|avx2|avx512`: the CPU code path of vectorized loops (another
    ///   value is an error when the runtime starts); `WEFT_AVX512=0` is `sse`;
    /// - `WEFT_FORBID_COMPILES_AFTER_WARMUP=1`: compiling after the warm-up is an error;
    /// - `WEFT_DEVICE=cpu|gpu|sim`: the device (`sim` is a test device) (another value is an error when the runtime
    ///   starts);
    /// - `WEFT_PTX_CHECK=1`: every kernel also emitted as PTX and assembled by `ptxas`;
    /// - `WEFT_STORE_QUOTA`: the most bytes all stores may hold at once;
    /// - `WEFT_KERNEL_TIME_MS`: the longest one kernel launch may run before it is cancelled;
    /// - `WEFT_GPU_BLOCKS`, `WEFT_GPU_ROWS_BLOCKS`: the most blocks of the GPU back end's 1-D
    ///   and 2-D grids ([`Config::gpu_grid`]);
    /// - `WEFT_MATMUL_GRID=auto|rows|RxC|RxCxL`: how dense products are laid over the ranks
    ///   ([`Config::matmul_grid`]; another value is an error when the runtime starts).
    /// - `WEFT_RANK_MEMORY`: the bytes a rank may hold for one product's grid
    ///   ([`Config::rank_memory`]).
    pub fn from_env() -> Config {
        Config::from_lookup(|name| std::env::var_os(name))
    }

    /// [`Config::from_env`] with the variables that `var` gives (`None`: not set), for
    /// callers and tests that do not read the process's environment.
    pub fn from_lookup(var: impl Fn(&str) -> Option<OsString>) -> Config {
        let text = |name: &str| var(name).map(|v| v.to_string_lossy().into_owned());
        let is = |name: &str, value: &str| text(name).is_some_and(|v| v.trim() == value);
        let number = |name: &str| text(name)?.trim().parse::<u64>().ok();
        let mut config = Config {
            component_cache: cache_dir(&var),
            ..Config::default()
        };
        if is("WEFT_PTX_CHECK", "1") {
            config.ptx_check = true;
        }
        if let Some(v) = text("WEFT_DEVICE") {
            match Device::from_name(&v) {
                Some(d) => config.device = d,
                None => config.env_errors.push(format!(
                    "WEFT_DEVICE={v}: not a device (cpu, gpu, or sim for tests)"
                )),
            }
        }
        if is("WEFT_FUSION", "0") {
            config.fusion = false;
        }
        if let Some(v) = text("WEFT_EXPLAIN") {
            match v.trim() {
                "0" => {}
                "1" => config.explain_to_stderr = true,
                "2" => (config.explain_to_stderr, config.explain_detail) = (true, true),
                _ => config.env_errors.push(format!(
                    "WEFT_EXPLAIN={v}: not a level (0: nothing, 1: a summary, 2: everything)"
                )),
            }
        }
        if is("WEFT_PROFILE", "1") {
            config.profile = true;
        }
        if let Some(path) = var("WEFT_TRACE") {
            config.trace = Some(PathBuf::from(path));
        }
        if is("WEFT_AVX512", "0") {
            config.simd = Some(weft_cpu::SimdPath::Sse);
        }
        if let Some(v) = text("WEFT_SIMD") {
            config.read_simd(&v);
        }
        if is("WEFT_CHECK_REPLICATION", "1") {
            config.check_replication = true;
        }
        if is("WEFT_FORBID_COMPILES_AFTER_WARMUP", "1") {
            config.forbid_compiles_after_warmup = true;
        }
        if is("WEFT_HUGE_PAGES", "0") {
            config.huge_pages = false;
        }
        if is("WEFT_PREFETCH", "0") {
            config.prefetch = false;
        }
        if let Some(b) = number("WEFT_POOL_BYTES") {
            config.pool_bytes = b;
        }
        if let Some(w) = number("WEFT_WINDOW") {
            config.window_bound = (w as usize).max(1);
        }
        if let Some(t) = number("WEFT_THREADS") {
            config.threads = t as usize;
        }
        if let Some(p) = number("WEFT_PIECES") {
            config.pieces = p.max(1);
        }
        if let Some(b) = number("WEFT_STORE_QUOTA") {
            config.limits.store_bytes = b;
        }
        if let Some(b) = number("WEFT_GPU_BLOCKS") {
            config.gpu_grid.blocks = u32::try_from(b).unwrap_or(u32::MAX).max(1);
        }
        if let Some(b) = number("WEFT_GPU_ROWS_BLOCKS") {
            config.gpu_grid.rows_blocks = b.max(1);
        }
        if let Some(v) = text("WEFT_MATMUL_GRID") {
            match weft_runtime::products::ProductGrid::parse(&v) {
                Ok(g) => config.matmul_grid = g,
                Err(e) => config.env_errors.push(format!("WEFT_MATMUL_GRID: {e}")),
            }
        }
        if let Some(b) = number("WEFT_RANK_MEMORY") {
            config.rank_memory = Some(b);
        }
        if let Some(ms) = number("WEFT_KERNEL_TIME_MS") {
            config.limits.kernel_time = Some(std::time::Duration::from_millis(ms));
        }
        config
    }
}

impl Config {
    /// Takes `WEFT_SIMD`'s value `v`: a path's name, or an entry in `env_errors`.
    fn read_simd(&mut self, v: &str) {
        match weft_cpu::SimdPath::from_name(v) {
            Some(path) => self.simd = Some(path),
            None => self.env_errors.push(format!(
                "WEFT_SIMD={v}: not a SIMD path (scalar, sse, avx2 or avx512)"
            )),
        }
    }

    /// The runtime core's part of the configuration.
    pub fn core_settings(&self) -> weft_runtime::Settings {
        let ranks = self.ranks.as_ref().map_or(1, Ranks::size) as u64;
        weft_runtime::Settings {
            pieces: self.pieces.max(ranks),
            window_bound: self.window_bound,
            explain: self.explain,
            summarize: self.summarize,
            profile: self.profile,
            limits: self.limits.clone(),
            matmul_grid: self.matmul_grid,
            rank_memory: self.rank_memory,
        }
    }

    /// The CPU back end's part of the configuration.
    pub fn cpu_options(&self) -> weft_cpu::CpuOptions {
        weft_cpu::CpuOptions {
            threads: self.threads,
            pool_bytes: self.pool_bytes,
            simd: self.simd,
            kernel_time: self.limits.kernel_time,
            guard_pages: false,
            pool: self.pool.clone(),
            huge_pages: self.huge_pages,
            prefetch: self.prefetch,
            function_cache: self.component_cache.as_ref().map(|d| d.join("kernels")),
        }
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    cache_dir(&|name| std::env::var_os(name))
}

/// The component cache directory that the variables `var` gives name (see
/// [`Config::from_env`]).
fn cache_dir(var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if var("WEFT_CACHE").is_some_and(|v| v == "0") {
        return None;
    }
    if let Some(dir) = var("WEFT_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("weft"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration that these variables give (and no others).
    fn with(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn weft_explain_takes_a_level_and_reports_anything_else() {
        let level = |c: Config| (c.explain_to_stderr, c.explain_detail, c.env_errors.len());
        assert_eq!(level(with(&[])), (false, false, 0));
        assert_eq!(level(with(&[("WEFT_EXPLAIN", "0")])), (false, false, 0));
        assert_eq!(level(with(&[("WEFT_EXPLAIN", "1")])), (true, false, 0));
        assert_eq!(level(with(&[("WEFT_EXPLAIN", " 2 ")])), (true, true, 0));
        let bad = with(&[("WEFT_EXPLAIN", "yes")]);
        assert!(!bad.explain_to_stderr);
        assert_eq!(
            bad.env_errors,
            ["WEFT_EXPLAIN=yes: not a level (0: nothing, 1: a summary, 2: everything)"]
        );
        // Printing on stderr gathers nothing for `take_explanations` or `take_summaries`.
        let printed = with(&[("WEFT_EXPLAIN", "2")]);
        assert!(!printed.explain && !printed.summarize);
    }

    #[test]
    fn weft_matmul_grid_reaches_the_core_and_a_bad_one_is_reported() {
        use weft_runtime::products::ProductGrid;
        assert_eq!(with(&[]).core_settings().matmul_grid, ProductGrid::Auto);
        let fixed = with(&[("WEFT_MATMUL_GRID", "2x3")]);
        assert_eq!(
            fixed.core_settings().matmul_grid,
            ProductGrid::Fixed {
                rows: 2,
                cols: 3,
                layers: 1
            }
        );
        assert!(fixed.env_errors.is_empty());
        let bad = with(&[("WEFT_MATMUL_GRID", "square")]);
        assert_eq!(bad.matmul_grid, ProductGrid::Auto);
        assert_eq!(bad.env_errors.len(), 1);
        assert!(bad.env_errors[0].starts_with("WEFT_MATMUL_GRID: \"square\""));
        let layered = with(&[
            ("WEFT_MATMUL_GRID", "2x2x4"),
            ("WEFT_RANK_MEMORY", "1000000"),
        ]);
        let settings = layered.core_settings();
        assert_eq!(
            settings.matmul_grid,
            ProductGrid::Fixed {
                rows: 2,
                cols: 2,
                layers: 4
            }
        );
        assert_eq!(settings.rank_memory, Some(1_000_000));
        assert_eq!(with(&[]).core_settings().rank_memory, None);
    }

    #[test]
    fn weft_profile_turns_profiling_on_and_reaches_the_core() {
        assert!(!with(&[]).profile);
        assert!(!with(&[("WEFT_PROFILE", "0")]).profile);
        let on = with(&[("WEFT_PROFILE", "1")]);
        assert!(on.profile);
        assert!(on.core_settings().profile);
        assert!(!with(&[]).core_settings().profile);
    }

    #[test]
    fn the_gpu_grid_caps_read_from_the_environment() {
        assert_eq!(with(&[]).gpu_grid, weft_ptx::GridCaps::default());
        let c = with(&[("WEFT_GPU_BLOCKS", "4096"), ("WEFT_GPU_ROWS_BLOCKS", "0")]);
        assert_eq!(
            c.gpu_grid,
            weft_ptx::GridCaps {
                blocks: 4096,
                rows_blocks: 1
            }
        );
        let c = with(&[("WEFT_GPU_BLOCKS", "99999999999")]);
        assert_eq!(c.gpu_grid.blocks, u32::MAX);
    }

    #[test]
    fn other_variables_read_through_a_lookup_as_from_the_environment() {
        let c = with(&[
            ("WEFT_THREADS", "3"),
            ("WEFT_WINDOW", "0"),
            ("WEFT_FUSION", "0"),
            ("WEFT_CACHE", "0"),
            ("WEFT_DEVICE", "tpu"),
        ]);
        assert_eq!(c.threads, 3);
        assert_eq!(c.window_bound, 1);
        assert!(!c.fusion);
        assert_eq!(c.component_cache, None);
        assert_eq!(
            c.cpu_options().function_cache,
            None,
            "no disk cache of kernels either"
        );
        assert_eq!(
            c.env_errors,
            ["WEFT_DEVICE=tpu: not a device (cpu, gpu, or sim for tests)"]
        );
        let c = with(&[("WEFT_CACHE_DIR", "/tmp/w"), ("WEFT_TRACE", "t.json")]);
        assert_eq!(c.component_cache, Some(PathBuf::from("/tmp/w")));
        assert_eq!(
            c.cpu_options().function_cache,
            Some(PathBuf::from("/tmp/w/kernels"))
        );
        assert_eq!(c.trace, Some(PathBuf::from("t.json")));
    }

    #[test]
    fn weft_simd_takes_path_names_and_reports_anything_else() {
        let mut config = Config::default();
        config.read_simd("scalar");
        assert_eq!(config.simd, Some(weft_cpu::SimdPath::Scalar));
        config.read_simd(" avx2 ");
        assert_eq!(config.simd, Some(weft_cpu::SimdPath::Avx2));
        config.read_simd("avx1024");
        assert_eq!(config.simd, Some(weft_cpu::SimdPath::Avx2));
        assert_eq!(config.env_errors.len(), 1);
        assert!(
            config.env_errors[0].contains("WEFT_SIMD=avx1024"),
            "{:?}",
            config.env_errors
        );
    }

    #[test]
    fn huge_pages_are_on_by_default_and_reach_the_cpu_back_end() {
        let mut config = Config::default();
        assert!(config.cpu_options().huge_pages);
        config.huge_pages = false;
        assert!(!config.cpu_options().huge_pages);
    }

    #[test]
    fn prefetches_are_on_by_default_and_reach_the_cpu_back_end() {
        let mut config = Config::default();
        assert!(config.cpu_options().prefetch);
        config.prefetch = false;
        let options = config.cpu_options();
        assert!(!options.prefetch);
        let mut backend = weft_cpu::CpuBackend::with_options(&options).expect("a back end");
        assert!(!backend.compiler().prefetch());
    }
}
