//! The JSON result line every example prints last on stdout.
//!
//! The object always holds `example`, `n`, `iters`, `warmup`, `threads`, `seed`,
//! `seconds_per_iter` (the median), `seconds_min`, `seconds_max`, and the runtime's counters
//! over the whole run: `tasks_submitted`, `tasks_executed`, `points_executed`,
//! `kernels_compiled`, `buffers_handed_over` (outputs that took over a dying input's memory),
//! `steps_replayed` and `launches_replayed` (steps of `Numeric::repeat` made from a trace);
//! and per timed iteration: `tasks_submitted_per_iter`,
//! `tasks_executed_per_iter`, and `kernels_compiled_timed` (kernels compiled during the timed
//! iterations: 0 once the loop is in a steady state). Examples add their own keys; the
//! benchmarks add the bandwidth floor ([`Report::floor`]).

use serde_json::{Map, Value};
use weft::Numeric;

use crate::cli::Args;
use crate::timing::{PerIter, Timing};

/// The process's peak resident set size in bytes (`VmHWM` in `/proc/self/status`), or 0
/// where that is not available.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The keys every report has.
pub const REQUIRED_KEYS: &[&str] = &[
    "example",
    "n",
    "iters",
    "threads",
    "seconds_per_iter",
    "tasks_submitted",
    "kernels_compiled",
    "fusion",
    "tasks_executed",
    "peak_rss_bytes",
];

/// A JSON object built key by key (printed with its keys sorted).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    fields: Map<String, Value>,
    /// Whether this process prints (rank 0 of a job on several ranks).
    quiet: bool,
}

impl Report {
    /// A report for `example` run with `args`.
    pub fn new(example: &str, args: &Args) -> Report {
        let mut r = Report::default();
        r.set("example", example)
            .set("n", args.n)
            .set("iters", args.iters as u64)
            .set("warmup", args.warmup as u64)
            .set("threads", args.threads as u64)
            .set("seed", args.seed)
            .set("ranks", args.rank_count() as u64);
        r.quiet = args.rank() != 0;
        r
    }

    /// Sets `key` (a non-finite float becomes `null`).
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Report {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// The memory-bandwidth floor of a workload measured at `seconds`: `read_gbs` (the
    /// probe's median rate, [`crate::bandwidth::Probe::gbs`]), `{prefix}compulsory_bytes`,
    /// `{prefix}floor_seconds` (those bytes at that rate) and `{prefix}floor_ratio`
    /// (`seconds` over the floor: 1 is the floor, and lower is impossible).
    pub fn floor(&mut self, prefix: &str, seconds: f64, bytes: f64, read_gbs: f64) -> &mut Report {
        let floor = crate::bandwidth::floor_seconds(bytes, read_gbs);
        self.set("read_gbs", read_gbs)
            .set(&format!("{prefix}compulsory_bytes"), bytes)
            .set(&format!("{prefix}floor_seconds"), floor)
            .set(&format!("{prefix}floor_ratio"), seconds / floor)
    }

    /// The spread of a bandwidth probe's samples: `probe_samples`, `read_gbs_min` and
    /// `read_gbs_max` (the floor uses their median, `read_gbs`).
    pub fn probe(&mut self, probe: &crate::bandwidth::Probe) -> &mut Report {
        let rates = probe.rates();
        self.set("probe_samples", rates.len() as u64)
            .set(
                "read_gbs_min",
                rates.iter().copied().fold(f64::INFINITY, f64::min),
            )
            .set("read_gbs_max", rates.iter().copied().fold(0.0, f64::max))
    }

    /// Records the timing and the work per timed iteration.
    pub fn timing(&mut self, t: &Timing, per: &PerIter) -> &mut Report {
        self.set("seconds_per_iter", t.median)
            .set("seconds_min", t.min)
            .set("seconds_max", t.max)
            .set("tasks_submitted_per_iter", per.tasks_submitted)
            .set("tasks_executed_per_iter", per.tasks_executed)
            .set("kernels_compiled_timed", per.kernels_compiled)
            .set("bytes_sent_per_iter", per.bytes_sent)
            .set("messages_sent_per_iter", per.messages_sent)
    }

    /// Records the runtime's counters so far.
    pub fn runtime_stats(&mut self, np: &Numeric) -> &mut Report {
        let (stats, (stores, bytes), peak, fusion, traffic, functions) = np.runtime(|rt| {
            (
                rt.stats(),
                rt.memory(),
                rt.peak_memory(),
                rt.config().fusion,
                rt.traffic(),
                rt.functions(),
            )
        });
        self.set("fusion", fusion)
            .set("peak_rss_bytes", peak_rss_bytes())
            .set("tasks_submitted", stats.tasks_submitted)
            .set("tasks_executed", stats.exec.tasks_executed)
            .set("points_executed", stats.exec.points_executed)
            .set("kernels_compiled", stats.exec.kernels_compiled)
            .set("buffers_handed_over", stats.exec.buffers_handed_over)
            .set("compile_ms_max", stats.exec.compile_seconds_max * 1e3)
            .set("functions_compiled", functions.compiled)
            .set("functions_from_cache", functions.from_cache)
            .set("stores_alive", stores as u64)
            .set("bytes_allocated", bytes)
            .set("bytes_allocated_peak", peak)
            .set("bytes_sent", traffic.bytes)
            .set("messages_sent", traffic.messages)
            .set("plans_derived", traffic.plans_derived)
            .set("plans_reused", traffic.plans_reused)
            .set("calls_replayed", np.replay_stats().replayed)
            .set("calls_recorded", np.replay_stats().recorded)
            .set("views_by_host", np.replay_stats().host_views)
            .set("steps_replayed", stats.steps_replayed)
            .set("launches_replayed", stats.launches_replayed)
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The object as one line of JSON.
    pub fn to_line(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }

    /// Prints the object as one line on stdout.
    pub fn print(&self) -> std::io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        crate::say(&self.to_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    #[test]
    fn one_line_with_the_fields() {
        let args = Cli::new("x", "x", 8, 2)
            .parse(["--threads", "3"])
            .expect("parses");
        let mut r = Report::new("demo", &args);
        let t = Timing {
            median: 0.5,
            min: 0.25,
            max: 1.0,
            samples: vec![0.25, 0.5, 1.0],
            warmup: 1,
        };
        let per = PerIter {
            tasks_submitted: 4.0,
            tasks_executed: 4.0,
            kernels_compiled: 0,
            bytes_sent: 0.0,
            messages_sent: 0.0,
        };
        r.timing(&t, &per).set("nan", f64::NAN);
        let line = r.to_line();
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["example"], "demo");
        assert_eq!(v["n"], 8);
        assert_eq!(v["threads"], 3);
        assert_eq!(v["seconds_per_iter"], 0.5);
        assert_eq!(v["nan"], Value::Null);
    }
}
