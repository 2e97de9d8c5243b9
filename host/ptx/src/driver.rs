//! Finding the CUDA driver. The driver library is loaded at run time (the build needs no CUDA
//! toolkit), and cudarc panics on the first driver call when it is missing, so the back end
//! checks first and reports what is missing instead.

use crate::{Error, Result};

/// Whether the CUDA driver library (`libcuda.so.1`) can be loaded.
pub fn present() -> bool {
    // SAFETY: only tries to load the library by name; nothing is called through it.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// `Ok` where the driver library loads, else [`Error::NoDriver`] naming it.
pub fn check_present() -> Result<()> {
    if present() {
        Ok(())
    } else {
        Err(Error::NoDriver(
            "no NVIDIA driver found: the CUDA driver library (libcuda.so.1) could not be loaded"
                .to_string(),
        ))
    }
}
