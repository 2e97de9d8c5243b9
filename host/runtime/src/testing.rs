//! A back end for tests of the runtime and of planners: host memory, kernels run by
//! `weft-ir`'s reference interpreter, and a log of what was asked of it. No Cranelift, no
//! Wasm: window-policy and planner tests use it to check what runs, in which order and with
//! which results.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use weft_ir::interp::{self, View};
use weft_ir::reduction::LoopPartial;
use weft_ir::{DType, Param, Scalar};

use crate::backend::{Backend, Binding, BufferId, MemoryStats, Prepared};
use crate::cache::Owner;
use crate::diagnose::{binding_view, decode, interp_args, store_dtypes};
use crate::kernel::{KernelEntry, KernelId};
use crate::{Error, Result};

/// What a [`FakeBackend`] was asked to do, shared with the test that made it (the back end
/// itself moves into the runtime core).
#[derive(Debug, Default)]
pub struct Log {
    /// Names of the kernels compiled, in order.
    pub compiled: Vec<String>,
    /// Names of the kernels launched, once per point, in order.
    pub launched: Vec<String>,
    /// Buffers freed, in order.
    pub freed: Vec<BufferId>,
    /// Kernels whose launch fails with a fault, by name (set by the test).
    pub faulty: HashSet<String>,
    /// Buffers allocated uncleared ([`Backend::alloc_uninit`]), in order.
    pub uncleared: Vec<BufferId>,
    /// Reads of buffers ([`Backend::read`]), as `(buffer, offset, bytes)`, in order.
    pub reads: Vec<(BufferId, u64, usize)>,
    /// Copies between buffers ([`Backend::copy`]), as `(from, to, bytes)`, in order.
    pub copies: Vec<(BufferId, BufferId, u64)>,
}

/// An interpreting back end with host memory (see the module documentation).
#[derive(Debug, Default)]
pub struct FakeBackend {
    buffers: HashMap<BufferId, Vec<u8>>,
    next: u64,
    kernels: HashMap<KernelId, Arc<KernelEntry>>,
    log: Arc<Mutex<Log>>,
    /// Reductions held back by launches (see [`Backend::launch`]).
    held: Vec<LoopPartial>,
    /// Elements stored through deferred bindings (buffer, byte offset, bytes), written at
    /// [`Backend::finish_deferred`].
    deferred_writes: Vec<(BufferId, usize, Vec<u8>)>,
}

impl FakeBackend {
    /// The log of what this back end does, to read while the core owns the back end.
    pub fn log(&self) -> Arc<Mutex<Log>> {
        self.log.clone()
    }

    fn logged(&self) -> MutexGuard<'_, Log> {
        // A test that panicked while holding the log poisons it; the log is still readable.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes of a buffer.
    pub fn bytes(&self, buffer: BufferId) -> Option<&[u8]> {
        self.buffers.get(&buffer).map(Vec::as_slice)
    }

    fn buffer(&mut self, buffer: BufferId) -> Result<&mut Vec<u8>> {
        self.buffers.get_mut(&buffer).ok_or_else(|| Error::Backend {
            backend: "fake",
            message: format!("no buffer {}", buffer.0),
        })
    }
}

fn range(len: usize, offset: u64, n: usize) -> Result<std::ops::Range<usize>> {
    let start = usize::try_from(offset).ok().filter(|&s| s <= len);
    match start.and_then(|s| s.checked_add(n).filter(|&e| e <= len).map(|e| s..e)) {
        Some(r) => Ok(r),
        None => Err(Error::Backend {
            backend: "fake",
            message: format!("{n} bytes at {offset} outside a buffer of {len}"),
        }),
    }
}

fn encode(values: &[Scalar], dtype: DType, out: &mut [u8]) {
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(dtype.size())) {
        let bytes = v.to_bits().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

impl Backend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn alloc(&mut self, bytes: u64) -> Result<BufferId> {
        let len = usize::try_from(bytes).map_err(|_| Error::Backend {
            backend: "fake",
            message: format!("{bytes} bytes"),
        })?;
        self.next += 1;
        self.buffers.insert(BufferId(self.next), vec![0; len]);
        Ok(BufferId(self.next))
    }

    /// Fills the buffer with the byte `0xA5` instead of zeros, so that a test reading
    /// memory the task did not write sees values no program computes.
    fn alloc_uninit(&mut self, bytes: u64) -> Result<BufferId> {
        let id = self.alloc(bytes)?;
        if let Some(b) = self.buffers.get_mut(&id) {
            b.fill(0xA5);
        }
        self.logged().uncleared.push(id);
        Ok(id)
    }

    fn free(&mut self, buffer: BufferId) {
        if self.buffers.remove(&buffer).is_some() {
            self.logged().freed.push(buffer);
        }
    }

    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        let b = self.buffer(buffer)?;
        let r = range(b.len(), offset, data.len())?;
        b[r].copy_from_slice(data);
        Ok(())
    }

    fn copy(&mut self, from: BufferId, to: BufferId, bytes: u64) -> Result<()> {
        self.logged().copies.push((from, to, bytes));
        let data = {
            let b = self.buffer(from)?;
            b[range(b.len(), 0, usize::try_from(bytes).unwrap_or(usize::MAX))?].to_vec()
        };
        let b = self.buffer(to)?;
        let r = range(b.len(), 0, data.len())?;
        b[r].copy_from_slice(&data);
        Ok(())
    }

    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<()> {
        self.logged().reads.push((buffer, offset, out.len()));
        let b = self.buffer(buffer)?;
        let r = range(b.len(), offset, out.len())?;
        out.copy_from_slice(&b[r]);
        Ok(())
    }

    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool {
        self.kernels
            .get(&kernel.id())
            .is_some_and(|k| k.same_kernel(kernel))
    }

    fn prepare(&mut self, kernel: &Arc<KernelEntry>, _owner: Owner) -> Result<Prepared> {
        if let Some(cached) = self.kernels.get(&kernel.id()) {
            return crate::backend::confirm_hit(cached, kernel);
        }
        self.logged().compiled.push(kernel.name().to_string());
        self.kernels.insert(kernel.id(), kernel.clone());
        Ok(Prepared::Compiled(std::time::Duration::ZERO))
    }

    fn launch(&mut self, kernel: KernelId, bindings: &[Binding], scalars: &[Scalar]) -> Result<()> {
        let entry = self.kernels.get(&kernel).ok_or_else(|| Error::Backend {
            backend: "fake",
            message: format!("kernel {kernel} was not prepared"),
        })?;
        let name = entry.name().to_string();
        let ir = entry.ir().kernel().clone();
        let faulty = {
            let mut log = self.logged();
            log.launched.push(name.clone());
            log.faulty.contains(&name)
        };
        if faulty {
            return Err(Error::KernelFault {
                kernel: name,
                message: "a fault the test asked for".into(),
            });
        }
        let dtypes = store_dtypes(&ir);
        // One interpreter storage per distinct buffer (views of one buffer alias), and one per
        // scratch binding.
        let mut storages: Vec<interp::Storage> = Vec::new();
        let mut sources: Vec<Option<BufferId>> = Vec::new();
        let mut deferred_copy: Vec<bool> = Vec::new();
        let mut deferred_views: Vec<View> = Vec::new();
        let mut views = Vec::new();
        for (binding, &dtype) in bindings.iter().zip(&dtypes) {
            let view = match binding {
                Binding::Buffer {
                    buffer,
                    offset,
                    deferred,
                    ..
                } => {
                    // A deferred argument's stores go to a copy of its own, written back
                    // after the kernel: no load of the kernel sees them.
                    let shared = sources
                        .iter()
                        .zip(&deferred_copy)
                        .position(|(s, &d)| *s == Some(*buffer) && !d);
                    let index = match shared.filter(|_| deferred.is_none()) {
                        Some(i) => i,
                        None => {
                            deferred_copy.push(deferred.is_some());
                            let bytes = self.buffer(*buffer)?;
                            storages.push(interp::Storage {
                                dtype,
                                data: decode(bytes, dtype),
                            });
                            sources.push(Some(*buffer));
                            storages.len() - 1
                        }
                    };
                    binding_view(binding, index, 0).ok_or_else(|| Error::Backend {
                        backend: "fake",
                        message: format!("offset {offset} does not fit"),
                    })?
                }
                Binding::Scratch { extents, .. } => {
                    let len: i64 = extents.iter().product();
                    storages.push(interp::Storage::zeros(dtype, len.max(0) as usize));
                    sources.push(None);
                    deferred_copy.push(false);
                    binding_view(binding, storages.len() - 1, 0).ok_or_else(|| Error::Backend {
                        backend: "fake",
                        message: "a scratch binding has no view".into(),
                    })?
                }
            };
            if matches!(
                binding,
                Binding::Buffer {
                    deferred: Some(_),
                    ..
                }
            ) {
                deferred_views.push(view.clone());
            }
            views.push(view);
        }
        // The interpreter takes arguments in parameter order.
        let args = interp_args(&ir, views, scalars);
        let held =
            interp::run_deferring(&ir, &args, &mut storages).map_err(|e| Error::KernelFault {
                kernel: name,
                message: e.message,
            })?;
        // Held-back reductions name their target by its store argument.
        for mut part in held {
            part.param = ir.params[..part.param as usize]
                .iter()
                .filter(|p| matches!(p, Param::Store { .. }))
                .count() as u32;
            self.held.push(part);
        }
        for ((storage, source), &d) in storages.iter().zip(&sources).zip(&deferred_copy) {
            if let Some(buffer) = source
                && !d
            {
                let bytes = self.buffer(*buffer)?;
                encode(&storage.data, storage.dtype, bytes);
            }
        }
        // Deferred stores land when the task's last point has run, only in their view.
        for view in &deferred_views {
            let (storage, Some(buffer)) = (&storages[view.storage], sources[view.storage]) else {
                continue;
            };
            let size = storage.dtype.size();
            for element in view_elements(view) {
                let Some(value) = storage.data.get(element) else {
                    continue;
                };
                let mut bytes = vec![0u8; size];
                encode(std::slice::from_ref(value), storage.dtype, &mut bytes);
                self.deferred_writes.push((buffer, element * size, bytes));
            }
        }
        Ok(())
    }

    fn take_reductions(&mut self) -> Result<Vec<LoopPartial>> {
        Ok(std::mem::take(&mut self.held))
    }

    fn finish_deferred(&mut self, commit: bool) -> Result<()> {
        for (buffer, at, bytes) in std::mem::take(&mut self.deferred_writes) {
            if commit {
                let b = self.buffer(buffer)?;
                let r = range(b.len(), at as u64, bytes.len())?;
                b[r].copy_from_slice(&bytes);
            }
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    fn memory(&self) -> MemoryStats {
        MemoryStats {
            allocated: self.buffers.values().map(|b| b.len() as u64).sum(),
            pooled: 0,
        }
    }
}

/// The storage elements of a view, in row-major order of its indices.
fn view_elements(view: &View) -> Vec<usize> {
    let mut out = Vec::new();
    if view.extents.iter().any(|&e| e <= 0) {
        return out;
    }
    let mut index = vec![0i64; view.extents.len()];
    loop {
        let at = index
            .iter()
            .zip(&view.strides)
            .fold(view.offset, |a, (&i, &s)| a + i * s);
        if let Ok(at) = usize::try_from(at) {
            out.push(at);
        }
        let mut d = view.extents.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < view.extents[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// A kernel with no parameters and an empty body, named `name`: for tasks whose kernel a test
/// never runs (planner tests look only at arguments).
pub fn empty_kernel(name: &str) -> std::sync::Arc<KernelEntry> {
    let ir = weft_ir::Kernel {
        name: name.to_string(),
        params: Vec::new(),
        body: Vec::new(),
    };
    match KernelEntry::new(name, &ir) {
        Ok(k) => std::sync::Arc::new(k),
        Err(e) => unreachable!("an empty kernel is valid: {e}"),
    }
}

/// A new 1-d `f64` store of `core` holding `values`.
pub fn f64_store(core: &mut crate::Core, values: &[f64]) -> Result<crate::StoreId> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    core.store_from_bytes(vec![values.len() as u64], DType::F64, &bytes)
}

/// `out[i] = a[i] * factor` over rank-1 `f64` stores (`a` read, `out` written), named
/// `name`: the kernel tests of caches and ids build many of, one per factor.
pub fn scale_kernel(name: &str, factor: f64) -> weft_ir::Kernel {
    let mut k = weft_ir::KernelBuilder::new(name);
    let a = k.store(DType::F64, 1, weft_ir::Privilege::Read);
    let out = k.store(DType::F64, 1, weft_ir::Privilege::Write);
    k.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let f = b.const_f64(factor);
        let y = b.mul(x, f);
        b.store(out, i, y);
    });
    k.finish()
}

/// A core on the fake back end, without fusion, under `limits`.
pub fn fake_core(limits: crate::Limits) -> crate::Core {
    crate::Core::new(
        crate::Settings {
            limits,
            ..crate::Settings::default()
        },
        Box::new(FakeBackend::default()),
        Box::new(crate::NoFusion),
    )
}

/// The elements of an `f64` store of `core`, in row-major order.
pub fn f64_values(core: &mut crate::Core, store: crate::StoreId) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for c in core.read_bytes(store)?.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        out.push(f64::from_le_bytes(word));
    }
    Ok(out)
}
