//! Counters for `GET /metrics`, in the Prometheus text format: jobs by state and tenant,
//! tasks and fused tasks, the time jobs and their kernels ran, bytes the warm runtimes hold, and
//! cache sizes.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use crate::records::{JobState, JobStats};

/// What one tenant's finished jobs added up to.
#[derive(Clone, Debug, Default)]
struct TenantCounters {
    finished: BTreeMap<&'static str, u64>,
    tasks_submitted: u64,
    tasks_executed: u64,
    plugin_calls: u64,
    run_seconds: f64,
    kernel_seconds: f64,
}

/// A counter's name, help text, and value from a tenant's counters.
type Counter = (&'static str, &'static str, fn(&TenantCounters) -> f64);

/// The service's counters.
pub struct Metrics {
    tenants: Mutex<Vec<TenantCounters>>,
    /// Bytes the stores of each worker's warm runtimes hold, by worker.
    held: Mutex<Vec<u64>>,
    /// Warm runtimes, by worker.
    runtimes: Mutex<Vec<usize>>,
}

/// Gauges read when metrics are rendered.
pub struct Gauges<'a> {
    /// Tenant names, by index.
    pub names: &'a [String],
    /// Each tenant's (queued, running) jobs.
    pub counts: Vec<(usize, usize)>,
    /// Compiled application components kept.
    pub components_cached: usize,
    /// Jobs whose event streams are open.
    pub live_jobs: usize,
}

impl Metrics {
    /// Zeroed counters for `tenants` tenants and `workers` workers.
    pub fn new(tenants: usize, workers: usize) -> Metrics {
        Metrics {
            tenants: Mutex::new(vec![TenantCounters::default(); tenants]),
            held: Mutex::new(vec![0; workers]),
            runtimes: Mutex::new(vec![0; workers]),
        }
    }

    /// A job of `tenant` finished in `state` after running `seconds`.
    pub fn finished(&self, tenant: usize, state: JobState, stats: &JobStats, seconds: f64) {
        let mut t = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let c = &mut t[tenant];
        *c.finished.entry(state.name()).or_default() += 1;
        c.tasks_submitted += stats.tasks_submitted;
        c.tasks_executed += stats.tasks_executed;
        c.plugin_calls += stats.plugin_calls_made + stats.plugin_calls_replayed;
        c.run_seconds += seconds;
        c.kernel_seconds += stats.kernel_us as f64 / 1e6;
    }

    /// Worker `worker` keeps `runtimes` warm runtimes whose stores hold `bytes`.
    pub fn worker(&self, worker: usize, runtimes: usize, bytes: u64) {
        self.held.lock().unwrap_or_else(|p| p.into_inner())[worker] = bytes;
        self.runtimes.lock().unwrap_or_else(|p| p.into_inner())[worker] = runtimes;
    }

    /// The text `GET /metrics` answers.
    pub fn render(&self, g: &Gauges<'_>) -> String {
        let t = self
            .tenants
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP weft_jobs Jobs by tenant and state (finished ones since the service started)."
        );
        let _ = writeln!(o, "# TYPE weft_jobs gauge");
        for (i, name) in g.names.iter().enumerate() {
            let (queued, running) = g.counts.get(i).copied().unwrap_or_default();
            let _ = writeln!(
                o,
                "weft_jobs{{tenant=\"{name}\",state=\"queued\"}} {queued}"
            );
            let _ = writeln!(
                o,
                "weft_jobs{{tenant=\"{name}\",state=\"running\"}} {running}"
            );
            for s in JobState::ALL.iter().filter(|s| s.finished()) {
                let n = t
                    .get(i)
                    .and_then(|c| c.finished.get(s.name()))
                    .copied()
                    .unwrap_or(0);
                let _ = writeln!(
                    o,
                    "weft_jobs{{tenant=\"{name}\",state=\"{}\"}} {n}",
                    s.name()
                );
            }
        }
        let counters: [Counter; 5] = [
            (
                "weft_tasks_submitted_total",
                "Tasks submitted by tenants' plugin calls.",
                |c| c.tasks_submitted as f64,
            ),
            (
                "weft_tasks_executed_total",
                "Tasks run after fusion.",
                |c| c.tasks_executed as f64,
            ),
            (
                "weft_plugin_calls_total",
                "Plugin calls tenants' applications made.",
                |c| c.plugin_calls as f64,
            ),
            (
                "weft_job_run_seconds_total",
                "Time tenants' jobs ran on workers.",
                |c| c.run_seconds,
            ),
            (
                "weft_kernel_seconds_total",
                "Time tenants' kernels ran (their tasks' launches and folds).",
                |c| c.kernel_seconds,
            ),
        ];
        for (metric, help, value) in counters {
            let _ = writeln!(o, "# HELP {metric} {help}");
            let _ = writeln!(o, "# TYPE {metric} counter");
            for (i, name) in g.names.iter().enumerate() {
                let v = t.get(i).map_or(0.0, value);
                let _ = writeln!(o, "{metric}{{tenant=\"{name}\"}} {v}");
            }
        }
        let held: u64 = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .sum();
        let runtimes: usize = self
            .runtimes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .sum();
        let gauges = [
            (
                "weft_store_bytes_held",
                "Bytes the stores of the warm runtimes hold.",
                held as f64,
            ),
            (
                "weft_runtimes_warm",
                "Tenant runtimes kept warm by the workers.",
                runtimes as f64,
            ),
            (
                "weft_components_cached",
                "Compiled application components kept.",
                g.components_cached as f64,
            ),
            (
                "weft_event_streams_live",
                "Jobs whose event streams are open.",
                g.live_jobs as f64,
            ),
        ];
        for (metric, help, v) in gauges {
            let _ = writeln!(o, "# HELP {metric} {help}");
            let _ = writeln!(o, "# TYPE {metric} gauge");
            let _ = writeln!(o, "{metric} {v}");
        }
        o
    }
}
