//! A back end that runs everything on another one and shows each kernel it prepares to a
//! hook first: the way to check (`weft-ptx`'s PTX check, `WEFT_PTX_CHECK=1`) or record
//! (`weft-examples`' `kernel_recording`) the kernels a program makes without changing how it
//! runs. A hook's error fails the `prepare`, and so the task.

use std::sync::Arc;

use weft_ir::Scalar;
use weft_ir::reduction::LoopPartial;

use crate::backend::{Backend, Binding, BufferId, MemoryStats, Prepared};
use crate::cache::Owner;
use crate::kernel::{KernelEntry, KernelId};
use crate::{Error, Result};

/// What an [`Observed`] back end calls on each kernel before preparing it: `Err(message)` fails
/// the prepare with a compile error naming the kernel.
pub type PrepareHook = Box<dyn FnMut(&KernelEntry) -> std::result::Result<(), String>>;

/// See the module documentation.
pub struct Observed {
    inner: Box<dyn Backend>,
    hook: PrepareHook,
}

impl Observed {
    /// `inner`, with `hook` shown every kernel before it is prepared (cached or not).
    pub fn new(inner: Box<dyn Backend>, hook: PrepareHook) -> Observed {
        Observed { inner, hook }
    }
}

impl Backend for Observed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn alloc(&mut self, bytes: u64) -> Result<BufferId> {
        self.inner.alloc(bytes)
    }
    fn alloc_uninit(&mut self, bytes: u64) -> Result<BufferId> {
        self.inner.alloc_uninit(bytes)
    }
    fn free(&mut self, buffer: BufferId) {
        self.inner.free(buffer)
    }
    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write(buffer, offset, data)
    }
    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<()> {
        self.inner.read(buffer, offset, out)
    }
    fn copy(&mut self, from: BufferId, to: BufferId, bytes: u64) -> Result<()> {
        self.inner.copy(from, to, bytes)
    }
    fn read_append(
        &mut self,
        buffer: BufferId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.inner.read_append(buffer, offset, len, out)
    }
    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool {
        self.inner.is_prepared(kernel)
    }
    fn prepare(&mut self, kernel: &Arc<KernelEntry>, owner: Owner) -> Result<Prepared> {
        (self.hook)(kernel).map_err(|message| Error::Compile {
            kernel: kernel.name().to_string(),
            message,
        })?;
        self.inner.prepare(kernel, owner)
    }
    fn launch(&mut self, kernel: KernelId, bindings: &[Binding], scalars: &[Scalar]) -> Result<()> {
        self.inner.launch(kernel, bindings, scalars)
    }
    fn take_reductions(&mut self) -> Result<Vec<LoopPartial>> {
        self.inner.take_reductions()
    }
    fn finish_deferred(&mut self, commit: bool) -> Result<()> {
        self.inner.finish_deferred(commit)
    }
    fn set_sole_launch(&mut self, sole: bool) {
        self.inner.set_sole_launch(sole)
    }
    fn set_cancel(&mut self, token: Option<Arc<crate::CancelToken>>) {
        self.inner.set_cancel(token)
    }
    fn synchronize(&mut self) -> Result<()> {
        self.inner.synchronize()
    }
    fn memory(&self) -> MemoryStats {
        self.inner.memory()
    }
    fn functions(&self) -> crate::backend::FunctionCounts {
        self.inner.functions()
    }
    fn record_mark(&mut self) -> Result<Option<u64>> {
        self.inner.record_mark()
    }
    fn mark_elapsed(&mut self, from: u64, to: u64) -> Result<Option<std::time::Duration>> {
        self.inner.mark_elapsed(from, to)
    }
    fn copy_bandwidth(&mut self, bytes: u64, samples: usize) -> Result<Option<Vec<f64>>> {
        self.inner.copy_bandwidth(bytes, samples)
    }
}
