//! NVIDIA's `ptxas`, to assemble a module offline: the check that generated PTX is valid,
//! with no GPU and no driver. `ptxas` is not needed to run Weft (the driver compiles PTX when
//! a module loads); tests and developers use this.
//!
//! [`find`] looks at `WEFT_PTXAS`, then at `target/ptxas/nvidia/cuda_nvcc/bin/ptxas` under
//! the workspace, where `scripts/test` installs the PyPI wheel `nvidia-cuda-nvcc-cu12`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ptxas` binary, or why there is none.
pub fn find() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("WEFT_PTXAS") {
        return Ok(PathBuf::from(p));
    }
    let installed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ptxas/nvidia/cuda_nvcc/bin/ptxas");
    if installed.is_file() {
        Ok(installed)
    } else {
        Err(format!(
            "ptxas not found at {}: run scripts/test (it installs the PyPI wheel \
             nvidia-cuda-nvcc-cu12 into target/ptxas) or set WEFT_PTXAS",
            installed.display()
        ))
    }
}

/// Assembles `ptx` for `arch` (`sm_80`, `sm_90`, ...), in a scratch directory named after
/// `name`; the error holds ptxas' messages.
pub fn assemble(ptx: &str, arch: &str, name: &str) -> Result<(), String> {
    assemble_with(&find()?, ptx, arch, name)
}

/// [`assemble`] with the `ptxas` binary at `ptxas`.
pub fn assemble_with(ptxas: &Path, ptx: &str, arch: &str, name: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "weft-ptxas-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(80)
        .collect();
    let src = dir.join(format!("{safe}.ptx"));
    let out = dir.join(format!("{safe}.{arch}.cubin"));
    std::fs::write(&src, ptx).map_err(|e| e.to_string())?;
    let run = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&out);
    if run.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ptxas -arch={arch} failed on {name}:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        ))
    }
}
