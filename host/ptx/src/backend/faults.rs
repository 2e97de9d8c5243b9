//! The fault words of one synchronization epoch: every launch between two synchronizations
//! gets a 32-bit word of one device array (zeroed once), and the host reads the words it
//! used in one copy per array when it synchronizes, instead of a word, a clear and a read
//! per launch.

use crate::device::Device;
use crate::{Error, Result, abi};

/// Why the host stopped the launches pending at a synchronization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// They ran past the kernel time limit.
    Limit(std::time::Duration),
    /// Their job was cancelled (`weft_runtime::CancelToken`).
    Job,
}

/// Words per array.
pub(super) const WORDS: u64 = 1024;

/// A launch whose fault word has not been read yet.
struct Pending {
    kernel: String,
    sites: Vec<abi::FaultSite>,
    /// Its array, and its word in it.
    array: usize,
    word: u64,
}

/// The arrays of fault words and the launches that use them.
#[derive(Default)]
pub(super) struct FaultWords {
    /// The arrays' addresses (each `WORDS` words, zero where unused).
    arrays: Vec<u64>,
    /// Words handed out this epoch, over all arrays.
    used: u64,
    pending: Vec<Pending>,
}

impl FaultWords {
    /// The address of a fresh, zero fault word for a launch of `kernel`.
    pub(super) fn take<D: Device>(
        &mut self,
        device: &mut D,
        kernel: &str,
        sites: Vec<abi::FaultSite>,
    ) -> Result<u64> {
        let array = usize::try_from(self.used / WORDS).unwrap_or(usize::MAX);
        let word = self.used % WORDS;
        if array == self.arrays.len() {
            let address = device.alloc(WORDS * 4)?;
            device.memset_zero(address, WORDS * 4)?;
            self.arrays.push(address);
        }
        let base = self
            .arrays
            .get(array)
            .copied()
            .ok_or_else(|| Error::Memory("a fault word array is missing".to_string()))?;
        self.used += 1;
        self.pending.push(Pending {
            kernel: kernel.to_string(),
            sites,
            array,
            word,
        });
        Ok(base + word * 4)
    }

    /// Whether a launch's fault word is still to be read.
    pub(super) fn any_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The addresses of the words still to be read (to stop their launches).
    pub(super) fn pending_addresses(&self) -> Vec<u64> {
        self.pending
            .iter()
            .filter_map(|p| self.arrays.get(p.array).map(|base| base + p.word * 4))
            .collect()
    }

    /// Reads the words of this epoch (the device has synchronized), clears them for the next
    /// one, and reports the first launch that faulted, or that the host stopped (`stopped`:
    /// why it set the pending words to [`abi::CANCELLED`]).
    pub(super) fn drain<D: Device>(&mut self, device: &mut D, stopped: Option<Stop>) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut words = Vec::with_capacity(usize::try_from(self.used).unwrap_or(0));
        let mut left = self.used;
        for &base in &self.arrays {
            if left == 0 {
                break;
            }
            let count = left.min(WORDS);
            let mut bytes = vec![0u8; usize::try_from(count * 4).unwrap_or(0)];
            device.read(base, &mut bytes)?;
            device.memset_zero(base, count * 4)?;
            words.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            left -= count;
        }
        self.used = 0;
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let at = usize::try_from(p.array as u64 * WORDS + p.word).unwrap_or(usize::MAX);
            let code = words.get(at).copied().unwrap_or(0);
            if code == abi::CANCELLED
                && let Some(stop) = stopped
            {
                return Err(Error::KernelFault {
                    kernel: p.kernel,
                    message: match stop {
                        Stop::Limit(limit) => format!(
                            "ran past the kernel time limit of {} ms and was cancelled",
                            limit.as_millis()
                        ),
                        Stop::Job => weft_runtime::backend::CANCELLED_BY_JOB.to_string(),
                    },
                });
            }
            if code != 0 {
                let site = usize::try_from(code - 1)
                    .ok()
                    .and_then(|i| p.sites.get(i))
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| format!("unknown fault code {code}"));
                return Err(Error::KernelFault {
                    kernel: p.kernel,
                    message: site,
                });
            }
        }
        Ok(())
    }

    /// Frees the arrays.
    pub(super) fn free<D: Device>(&mut self, device: &mut D) {
        for a in self.arrays.drain(..) {
            device.free(a);
        }
    }
}
