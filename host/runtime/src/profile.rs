//! Where the time of kernel runs goes, per kernel (`WEFT_PROFILE=1`): how many times each
//! kernel ran, for how long in all, and from where in the application.
//!
//! The core times each task it runs when [`Settings::profile`](crate::Settings::profile) is
//! on: one clock reading before the task and one after it (the back end synchronized, so that
//! a device's queued work is counted where it belongs), less the time spent compiling its
//! kernel. Nothing is measured when it is off.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// What the profile knows of one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelProfile {
    /// The kernel's name, its provenance: `fused(numeric.binary.mul.f64.r1+...)` for a fused
    /// task, `numeric.unary.exp.f64.r1` for a task that ran alone.
    pub kernel: String,
    /// Where in the application the first task that ran it was asked for (for a fused task,
    /// its first task's call site), if known.
    pub site: Option<Arc<str>>,
    /// How many times a task ran it (index launches: each over all of its points).
    pub launches: u64,
    /// Seconds its launches took, in all (compiling not counted).
    pub seconds: f64,
}

impl KernelProfile {
    /// The mean time of one launch, in seconds.
    pub fn mean_seconds(&self) -> f64 {
        if self.launches == 0 {
            0.0
        } else {
            self.seconds / self.launches as f64
        }
    }
}

/// The time of the kernels a runtime ran so far (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// One entry per kernel name, the most time first (ties by name).
    pub kernels: Vec<KernelProfile>,
    /// Kernels compiled.
    pub compiles: u64,
    /// Seconds spent compiling them (not counted in the kernels' times).
    pub compile_seconds: f64,
}

impl Profile {
    /// The seconds of all kernels' launches.
    pub fn total_seconds(&self) -> f64 {
        self.kernels.iter().fold(0.0, |sum, k| sum + k.seconds)
    }

    /// All launches of all kernels.
    pub fn launches(&self) -> u64 {
        self.kernels.iter().map(|k| k.launches).sum()
    }

    /// The entry of the kernel named `kernel`, if it ran.
    pub fn kernel(&self, kernel: &str) -> Option<&KernelProfile> {
        self.kernels.iter().find(|k| k.kernel == kernel)
    }

    /// The profile as a table of its `top` kernels with the most time, for people: a heading
    /// with the totals, one line per kernel (its share of the total, total milliseconds,
    /// launches, mean microseconds per launch, name and call site), and a line for the rest.
    pub fn table(&self, top: usize) -> String {
        let total = self.total_seconds();
        let mut out = format!(
            "weft profile: {} kernel(s), {} launch(es), {:.3} ms in kernels",
            self.kernels.len(),
            self.launches(),
            total * 1e3
        );
        if self.compiles > 0 {
            let _ = write!(
                out,
                " ({} compile(s), {:.3} ms, not counted)",
                self.compiles,
                self.compile_seconds * 1e3
            );
        }
        out.push('\n');
        if self.kernels.is_empty() {
            return out;
        }
        let share = |s: f64| if total > 0.0 { 100.0 * s / total } else { 0.0 };
        out.push_str("   share    total ms  launches    mean us  kernel\n");
        for k in self.kernels.iter().take(top) {
            let site = crate::planner::at_sites(k.site.as_deref());
            let _ = writeln!(
                out,
                "  {:5.1}%  {:10.3}  {:8}  {:9.1}  {}{site}",
                share(k.seconds),
                k.seconds * 1e3,
                k.launches,
                k.mean_seconds() * 1e6,
                k.kernel
            );
        }
        if self.kernels.len() > top {
            let rest = &self.kernels[top..];
            let seconds = rest.iter().fold(0.0, |sum, k| sum + k.seconds);
            let launches: u64 = rest.iter().map(|k| k.launches).sum();
            let _ = writeln!(
                out,
                "  {:5.1}%  {:10.3}  {:8}  {:>9}  ({} more kernel(s))",
                share(seconds),
                seconds * 1e3,
                launches,
                "",
                rest.len()
            );
        }
        out
    }
}

/// The running tally behind a [`Profile`].
#[derive(Debug, Default)]
pub(crate) struct Profiler {
    kernels: HashMap<String, KernelProfile>,
}

impl Profiler {
    /// Counts one launch of `kernel` that took `seconds`, asked for at `site`.
    pub(crate) fn record(&mut self, kernel: &str, site: Option<&Arc<str>>, seconds: f64) {
        let entry = self
            .kernels
            .entry(kernel.to_string())
            .or_insert_with(|| KernelProfile {
                kernel: kernel.to_string(),
                site: site.cloned(),
                launches: 0,
                seconds: 0.0,
            });
        entry.launches += 1;
        entry.seconds += seconds;
    }

    /// The profile so far, with the compiles counted by `compiles` and `compile_seconds`.
    pub(crate) fn profile(&self, compiles: u64, compile_seconds: f64) -> Profile {
        let mut kernels: Vec<KernelProfile> = self.kernels.values().cloned().collect();
        kernels.sort_by(|a, b| {
            b.seconds
                .total_cmp(&a.seconds)
                .then_with(|| a.kernel.cmp(&b.kernel))
        });
        Profile {
            kernels,
            compiles,
            compile_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_add_up_per_kernel_and_the_table_lists_the_most_time_first() {
        let mut p = Profiler::default();
        let site: Arc<str> = "src/main.rs:12:5".into();
        // Binary fractions: the sums are exact.
        p.record("numeric.unary.exp.f64.r1", None, 0.015625);
        p.record("fused(a+b)", Some(&site), 0.0625);
        p.record("numeric.unary.exp.f64.r1", None, 0.046875);
        p.record("z.small", None, 0.03125);
        let profile = p.profile(2, 0.5);
        let names: Vec<&str> = profile.kernels.iter().map(|k| k.kernel.as_str()).collect();
        assert_eq!(
            names,
            ["fused(a+b)", "numeric.unary.exp.f64.r1", "z.small"],
            "the most time first, ties broken by name"
        );
        let exp = profile.kernel("numeric.unary.exp.f64.r1").unwrap();
        assert_eq!(exp.launches, 2);
        assert_eq!(exp.seconds, 0.0625);
        assert_eq!(exp.mean_seconds(), 0.03125);
        assert_eq!(profile.launches(), 4);
        let table = profile.table(2);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "weft profile: 3 kernel(s), 4 launch(es), 156.250 ms in kernels (2 compile(s), \
             500.000 ms, not counted)"
        );
        assert_eq!(
            lines[1],
            "   share    total ms  launches    mean us  kernel"
        );
        assert_eq!(
            lines[2],
            "   40.0%      62.500         1    62500.0  fused(a+b), at src/main.rs:12"
        );
        assert_eq!(
            lines[3],
            "   40.0%      62.500         2    31250.0  numeric.unary.exp.f64.r1"
        );
        assert_eq!(
            lines[4],
            "   20.0%      31.250         1             (1 more kernel(s))"
        );
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn an_empty_profile_says_so_in_one_line() {
        let table = Profiler::default().profile(0, 0.0).table(10);
        assert_eq!(
            table,
            "weft profile: 0 kernel(s), 0 launch(es), 0.000 ms in kernels\n"
        );
    }
}
