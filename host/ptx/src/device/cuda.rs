//! [`CudaDevice`]: the [`Device`] calls made through the CUDA driver (feature `cuda`).
//!
//! - **One stream**: everything runs on the context's null stream, in order; cudarc's event
//!   tracking is not used (memory is managed here by address, through the driver's own
//!   calls), and a second stream exists only to stop runaway launches
//!   ([`Device::write_now`]).
//! - **Memory** comes from the device's default stream-ordered pool, whose release threshold
//!   is set to keep freed memory (no return to the OS at each synchronization). Memory from
//!   that pool may hold bytes another runtime of the process freed: the back end clears or
//!   writes what it allocates before anything reads it.
//! - **Modules** load with `cuModuleLoadDataEx` and the JIT's error and info logs, which a
//!   refused module's error quotes.
//! - **Sticky errors** (an illegal address, a failed launch) leave the context unusable for
//!   every runtime of the process: they come back as [`Error::DeviceLost`], from this call
//!   and every later one.

use std::ffi::{CString, c_void};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{CudaContext, CudaStream};

use super::{Device, Grid, LoadedModule};
use crate::{Error, Result};

/// Bytes kept for each of the JIT's logs.
const LOG_BYTES: usize = 16 << 10;

/// A GPU reached through the CUDA driver (see the module documentation).
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The stream [`Device::write_now`] copies on: it does not wait for the launches.
    side: Option<Arc<CudaStream>>,
}

/// A loaded module, unloaded when the last of its functions is dropped.
struct ModuleHandle {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `module` was loaded by `cuModuleLoadDataEx` in this context and is
            // unloaded only here, once, when no function of it is left (every `CudaEntry`
            // holds an `Rc` of this handle).
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// An entry of a module loaded on a [`CudaDevice`].
#[derive(Clone)]
pub struct CudaEntry {
    function: sys::CUfunction,
    /// Held so that the module stays loaded while the entry lives.
    _module: Rc<ModuleHandle>,
}

/// Whether the driver's error leaves the context unusable (a "sticky" error).
fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// The back end's error for a failed driver call made to do `what`.
fn driver(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if is_sticky(e.0) {
            Error::DeviceLost(format!("{what}: {e}"))
        } else {
            Error::Driver(format!("{what}: {e}"))
        }
    }
}

/// A `usize` of `bytes`, or a memory error.
fn size(bytes: u64) -> Result<usize> {
    usize::try_from(bytes).map_err(|_| Error::Memory(format!("{bytes} bytes do not fit")))
}

/// The text of a NUL-terminated log buffer.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

impl CudaDevice {
    /// GPU `ordinal`, through the driver: its primary context (shared with every runtime of
    /// the process), its null stream and, where `side_stream`, a second stream for
    /// stopping runaway launches. Fails with [`Error::NoDriver`] where the driver library
    /// cannot be loaded (checked before any driver call, which would panic).
    pub fn new(ordinal: usize, side_stream: bool) -> Result<CudaDevice> {
        crate::driver::check_present()?;
        let ctx = CudaContext::new(ordinal).map_err(driver("cannot open the GPU"))?;
        // SAFETY: this device makes no `CudaSlice` (memory is managed by address through the
        // driver's calls), so no cudarc-tracked buffer is ever shared between streams: the
        // events cudarc would record per use only cost time.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        // Made before any work: making a second stream synchronizes the context once.
        let side = if side_stream {
            Some(
                ctx.new_stream()
                    .map_err(driver("a stream for cancelling"))?,
            )
        } else {
            None
        };
        // Keep freed memory in the pool instead of returning it at each synchronization.
        // SAFETY: `cu_device` is the device the context was opened on; the attribute takes
        // a `u64`, and `threshold` lives across the call.
        unsafe {
            let pool = result::device::get_default_mem_pool(ctx.cu_device())
                .map_err(driver("the device's memory pool"))?;
            let mut threshold = u64::MAX;
            result::mem_pool::set_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast::<c_void>(),
            )
            .map_err(driver("the memory pool's release threshold"))?;
        }
        Ok(CudaDevice { ctx, stream, side })
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("making the GPU's context current"))
    }
}

impl Device for CudaDevice {
    type Function = CudaEntry;
    type Mark = cudarc::driver::CudaEvent;

    fn name(&self) -> Result<String> {
        self.ctx.name().map_err(driver("the device's name"))
    }

    fn alloc(&mut self, bytes: u64) -> Result<u64> {
        self.bind()?;
        // SAFETY: the stream is this context's null stream; the memory is uninitialised, and
        // the back end clears or writes it before any read (the trait's contract).
        unsafe { result::malloc_async(self.stream.cu_stream(), size(bytes.max(1))?) }
            .map_err(driver("allocating device memory"))
    }

    fn free(&mut self, address: u64) {
        if self.bind().is_ok() {
            // SAFETY: `address` came from `alloc` on this stream and is freed once (the back
            // end forgets it here); the free is ordered after every launch that uses it.
            let _ = unsafe { result::free_async(address, self.stream.cu_stream()) };
        }
    }

    fn memset_zero(&mut self, address: u64, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the back end passes a range inside one live allocation of this stream.
        unsafe { result::memset_d8_async(address, 0, size(bytes)?, self.stream.cu_stream()) }
            .map_err(driver("clearing device memory"))
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: the range is inside one live allocation; `data` is pageable host memory,
        // which the driver stages before the call returns, so it may be dropped after.
        unsafe { result::memcpy_htod_async(address, data, self.stream.cu_stream()) }
            .map_err(driver("copying to the GPU"))
    }

    fn read(&mut self, address: u64, out: &mut [u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: the range is inside one live allocation; the stream is synchronized before
        // `out` is used or dropped.
        unsafe { result::memcpy_dtoh_async(out, address, self.stream.cu_stream()) }
            .map_err(driver("copying from the GPU"))?;
        self.synchronize()
    }

    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: both ranges lie inside live allocations of this stream.
        unsafe { result::memcpy_dtod_async(dst, src, size(bytes)?, self.stream.cu_stream()) }
            .map_err(driver("copying on the GPU"))
    }

    fn load(
        &mut self,
        kernel: &str,
        ptx: &str,
        entries: &[String],
    ) -> Result<LoadedModule<CudaEntry>> {
        self.bind()?;
        let image = CString::new(ptx)
            .map_err(|_| Error::Driver(format!("kernel `{kernel}`: its PTX holds a NUL byte")))?;
        let mut info = vec![0u8; LOG_BYTES];
        let mut error = vec![0u8; LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver reads size options as integers stored in the pointer's place.
        let mut values: [*mut c_void; 4] = [
            info.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG_BYTES),
            error.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG_BYTES),
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is a NUL-terminated PTX text that lives across the call; the four
        // options each have their value (two buffers of `LOG_BYTES` bytes that outlive the
        // call, and their sizes); `module` is written by the driver on success.
        let code = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if code != CUresult::CUDA_SUCCESS {
            let log = log_text(&error);
            let what = format!("kernel `{kernel}`: loading its PTX");
            let e = driver(&what)(DriverError(code));
            return Err(match e {
                Error::Driver(m) if !log.is_empty() => {
                    Error::Driver(format!("{m}; the JIT said: {log}"))
                }
                other => other,
            });
        }
        let handle = Rc::new(ModuleHandle {
            ctx: self.ctx.clone(),
            module,
        });
        let mut functions = Vec::with_capacity(entries.len());
        for name in entries {
            let c_name = CString::new(name.as_str()).map_err(|_| {
                Error::Driver(format!(
                    "kernel `{kernel}`: entry name {name:?} holds a NUL"
                ))
            })?;
            // SAFETY: `module` is loaded (held by `handle`) and `c_name` is NUL-terminated.
            let function = unsafe { result::module::get_function(module, c_name) }
                .map_err(driver("finding an entry"))?;
            functions.push(CudaEntry {
                function,
                _module: handle.clone(),
            });
        }
        Ok(LoadedModule {
            functions,
            log: log_text(&info),
        })
    }

    fn launch(&mut self, function: &CudaEntry, grid: Grid, args: &[u64]) -> Result<()> {
        self.bind()?;
        let mut words: Vec<u64> = args.to_vec();
        let mut params: Vec<*mut c_void> = words
            .iter_mut()
            .map(|w| (w as *mut u64).cast::<c_void>())
            .collect();
        let [bx, by, bz] = grid.blocks;
        let [tx, ty, tz] = grid.threads;
        // SAFETY: `function` belongs to a module still loaded (its entry holds the module);
        // `params` points at one 64-bit word per parameter of the entry (the launcher builds
        // them in the order `abi` states), which the driver copies before the call returns;
        // every address among them is a live allocation, and every access the entry makes
        // is checked against the extents passed with it.
        unsafe {
            result::launch_kernel(
                function.function,
                (bx, by, bz),
                (tx, ty, tz),
                0,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(driver("launching a kernel"))
    }

    fn synchronize(&mut self) -> Result<()> {
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(driver("waiting for the GPU"))
    }

    fn wait_for(&mut self, limit: Duration) -> Result<bool> {
        self.bind()?;
        let done = self
            .stream
            .record_event(None)
            .map_err(driver("recording an event"))?;
        let start = Instant::now();
        let mut backoff = super::wait::Backoff::new();
        while !done
            .try_is_complete()
            .map_err(driver("waiting for the GPU"))?
        {
            let waited = start.elapsed();
            if waited >= limit {
                return Ok(false);
            }
            backoff.wait(waited, limit);
        }
        Ok(true)
    }

    fn mark(&mut self) -> Result<cudarc::driver::CudaEvent> {
        self.bind()?;
        self.stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("recording an event"))
    }

    fn elapsed(
        &mut self,
        from: &cudarc::driver::CudaEvent,
        to: &cudarc::driver::CudaEvent,
    ) -> Result<Duration> {
        let ms = from.elapsed_ms(to).map_err(driver("timing on the GPU"))?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn write_now(&mut self, address: u64, data: &[u8]) -> Result<()> {
        self.bind()?;
        let Some(side) = &self.side else {
            return self.write(address, data);
        };
        // SAFETY: `address` is inside a live allocation (a fault word the back end keeps
        // until the stream is synchronized); the copy runs on `side`, which does not wait
        // for the launches (they must see the word while they run), and is synchronized
        // before `data` can be dropped.
        unsafe { result::memcpy_htod_async(address, data, side.cu_stream()) }
            .map_err(driver("stopping a launch"))?;
        side.synchronize().map_err(driver("stopping a launch"))
    }
}
