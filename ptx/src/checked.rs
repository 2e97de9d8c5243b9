//! A back end that runs everything on another one and checks that the GPU back end could run
//! every kernel it prepares: each kernel is emitted as PTX, and, where `ptxas` is given,
//! assembled for `sm_80` and `sm_90`. A kernel that does not emit or assemble fails its
//! `prepare` with the reason. `WEFT_PTX_CHECK=1` puts it around the CPU back end (see
//! `weft::Config::ptx_check`), so that a whole test suite checks the PTX of every kernel it
//! makes on a machine without a GPU.

use std::collections::HashSet;
use std::path::PathBuf;

use weft_ir::Scalar;
use weft_ir::reduction::LoopPartial;
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, KernelId, MemoryStats, Prepared};

/// See the module documentation.
pub struct CheckedBackend {
    inner: Box<dyn Backend>,
    ptxas: Option<PathBuf>,
    /// Kernels already checked, by id.
    checked: HashSet<KernelId>,
}

impl CheckedBackend {
    /// `inner`, with every kernel also emitted as PTX and, if `ptxas` is given, assembled.
    pub fn new(inner: Box<dyn Backend>, ptxas: Option<PathBuf>) -> CheckedBackend {
        CheckedBackend {
            inner,
            ptxas,
            checked: HashSet::new(),
        }
    }

    fn check(&self, kernel: &KernelEntry) -> Result<(), String> {
        let module = crate::emit(kernel.ir()).map_err(|e| e.to_string())?;
        if let Some(ptxas) = &self.ptxas {
            for arch in ["sm_80", "sm_90"] {
                crate::ptxas::assemble_with(ptxas, &module.text, arch, kernel.name())?;
            }
        }
        Ok(())
    }
}

impl Backend for CheckedBackend {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn alloc(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        self.inner.alloc(bytes)
    }
    fn alloc_uninit(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        self.inner.alloc_uninit(bytes)
    }
    fn free(&mut self, buffer: BufferId) {
        self.inner.free(buffer)
    }
    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> weft_runtime::Result<()> {
        self.inner.write(buffer, offset, data)
    }
    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> weft_runtime::Result<()> {
        self.inner.read(buffer, offset, out)
    }
    fn is_prepared(&self, kernel: KernelId) -> bool {
        self.inner.is_prepared(kernel)
    }
    fn prepare(&mut self, kernel: &KernelEntry) -> weft_runtime::Result<Prepared> {
        if !self.checked.contains(&kernel.id()) {
            self.check(kernel)
                .map_err(|message| weft_runtime::Error::Compile {
                    kernel: kernel.name().to_string(),
                    message: format!("the PTX check (WEFT_PTX_CHECK) failed: {message}"),
                })?;
            self.checked.insert(kernel.id());
        }
        self.inner.prepare(kernel)
    }
    fn launch(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> weft_runtime::Result<()> {
        self.inner.launch(kernel, bindings, scalars)
    }
    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        self.inner.take_reductions()
    }
    fn finish_deferred(&mut self, commit: bool) -> weft_runtime::Result<()> {
        self.inner.finish_deferred(commit)
    }
    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        self.inner.synchronize()
    }
    fn memory(&self) -> MemoryStats {
        self.inner.memory()
    }
}
