//! The memory-bandwidth floor: a plain-Rust read probe, run in the benchmark's own process at
//! its thread count, and the ratio of a measured time to the time the workload's compulsory
//! bytes take at that bandwidth.
//!
//! The probe ([`Probe`]) allocates a buffer far larger than the caches, touches it once, and
//! then, at each sample, has `threads` threads each sum their share of it with four
//! independent streams (four cursors a quarter of the share apart); the result is the median
//! rate of the samples. Summing integers with wrapping adds keeps the arithmetic off the
//! critical path, so the loop is bound by the reads alone. The benchmarks sample it between
//! their timed iterations, so that the probe and the workload see the same machine.

use std::time::Instant;

/// Bytes the probe reads per pass: well above the last-level cache of the machines we run on.
pub const PROBE_BYTES: usize = 256 << 20;

/// How many times the probe reads the buffer (the median counts).
const PASSES: usize = 5;

/// A read-bandwidth probe whose buffer stays allocated, so that a benchmark can sample it
/// between its timed iterations ([`Probe::sample`]): the probe then sees the machine in the
/// states the workload saw (on a shared machine the bandwidth left to us drifts by a factor
/// of two within a run), and [`Probe::gbs`] is the median of every sample.
pub struct Probe {
    buffer: Vec<u64>,
    share: usize,
    rates: Vec<f64>,
    /// A device whose memory is not the host's (a GPU): the probe is its device-to-device
    /// copy, `bytes` a sample, and the host buffer is empty.
    device: Option<(weft::Numeric, u64)>,
}

impl Probe {
    /// A probe for `threads` threads reading `bytes` bytes per sample (at least four streams
    /// of 64 words per thread); each thread first-touches its own share, so its pages lie
    /// near it. It takes no sample yet.
    pub fn new(threads: usize, bytes: usize) -> Probe {
        let threads = threads.max(1);
        let words = (bytes / 8).max(threads * 4 * 64);
        let mut buffer = vec![0u64; words];
        let share = words.div_ceil(threads);
        std::thread::scope(|s| {
            for (t, part) in buffer.chunks_mut(share).enumerate() {
                s.spawn(move || {
                    for (i, w) in part.iter_mut().enumerate() {
                        *w = (t * share + i) as u64;
                    }
                });
            }
        });
        Probe {
            buffer,
            share,
            rates: Vec::new(),
            device: None,
        }
    }

    /// The probe of `np`'s device: where its memory is the host's (the CPU), [`Probe::new`];
    /// where it is not (a GPU), the device's own copy probe
    /// ([`weft::Runtime::copy_bandwidth`]: GB/s of bytes read plus written, `bytes` a copy),
    /// so that a GPU benchmark's floor is the GPU's memory.
    pub fn for_device(np: &weft::Numeric, threads: usize, bytes: usize) -> weft::Result<Probe> {
        let first = np.runtime(|rt| rt.copy_bandwidth(bytes as u64, 1))?;
        match first {
            Some(rates) => Ok(Probe {
                buffer: Vec::new(),
                share: 1,
                rates,
                device: Some((np.clone(), bytes as u64)),
            }),
            None => Ok(Probe::new(threads, bytes)),
        }
    }

    /// Reads the buffer once, one thread per share with four streams each, and records the
    /// rate in GB/s (1e9 bytes per second), which it returns.
    pub fn sample(&mut self) -> f64 {
        if let Some((np, bytes)) = &self.device {
            let rate = np
                .runtime(|rt| rt.copy_bandwidth(*bytes, 1))
                .ok()
                .flatten()
                .and_then(|r| r.first().copied())
                .unwrap_or(f64::NAN);
            self.rates.push(rate);
            return rate;
        }
        let start = Instant::now();
        let sums: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .buffer
                .chunks(self.share)
                .map(|part| s.spawn(move || four_streams(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        });
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(sums);
        let rate = (self.buffer.len() * 8) as f64 / seconds / 1e9;
        self.rates.push(rate);
        rate
    }

    /// Takes `n` samples.
    pub fn samples(&mut self, n: usize) -> &mut Probe {
        for _ in 0..n {
            self.sample();
        }
        self
    }

    /// The median of the samples taken, in GB/s (taking one first if there are none).
    pub fn gbs(&mut self) -> f64 {
        if self.rates.is_empty() {
            self.sample();
        }
        crate::timing::median(&self.rates)
    }

    /// The samples taken, in the order taken.
    pub fn rates(&self) -> &[f64] {
        &self.rates
    }
}

/// The median read bandwidth, in GB/s (1e9 bytes per second), of `threads` threads reading
/// `bytes` bytes with four streams each, over five samples taken now (see [`Probe`]).
pub fn read_gbs(threads: usize, bytes: usize) -> f64 {
    Probe::new(threads, bytes).samples(PASSES).gbs()
}

/// The wrapping sum of `part`, read as four streams a quarter of `part` apart.
fn four_streams(part: &[u64]) -> u64 {
    let quarter = part.len() / 4;
    let (a, rest) = part.split_at(quarter);
    let (b, rest) = rest.split_at(quarter);
    let (c, rest) = rest.split_at(quarter);
    let (d, tail) = rest.split_at(quarter);
    let mut acc = [0u64; 4];
    for i in 0..quarter {
        acc[0] = acc[0].wrapping_add(a[i]);
        acc[1] = acc[1].wrapping_add(b[i]);
        acc[2] = acc[2].wrapping_add(c[i]);
        acc[3] = acc[3].wrapping_add(d[i]);
    }
    tail.iter()
        .fold(acc.iter().fold(0u64, |x, &y| x.wrapping_add(y)), |x, &y| {
            x.wrapping_add(y)
        })
}

/// The time `bytes` compulsory bytes take at `gbs` GB/s, in seconds.
pub fn floor_seconds(bytes: f64, gbs: f64) -> f64 {
    bytes / (gbs * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_streams_sums_every_word() {
        for len in [0usize, 1, 7, 64, 1001] {
            let part: Vec<u64> = (0..len as u64).collect();
            let want = part.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            assert_eq!(four_streams(&part), want, "len {len}");
        }
    }

    #[test]
    fn the_probe_measures_a_positive_finite_rate() {
        let gbs = read_gbs(2, 8 << 20);
        assert!(gbs.is_finite() && gbs > 0.0, "{gbs}");
    }

    #[test]
    fn the_probe_reports_the_median_of_its_samples() {
        let mut probe = Probe::new(2, 1 << 20);
        assert!(probe.rates().is_empty());
        let got: Vec<f64> = (0..3).map(|_| probe.sample()).collect();
        assert_eq!(probe.rates(), got.as_slice());
        let mut sorted = got.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(probe.gbs(), sorted[1]);
    }

    #[test]
    fn the_floor_is_bytes_over_bandwidth() {
        assert_eq!(floor_seconds(2e9, 4.0), 0.5);
    }
}
