//! Every module the filetests make, assembled offline by NVIDIA's `ptxas` for `sm_80` and
//! `sm_90`: the PTX is valid without a GPU in sight.
//!
//! `ptxas` comes from the PyPI wheel `nvidia-cuda-nvcc-cu12`, which `scripts/test` installs
//! into `target/ptxas`; `WEFT_PTXAS` names another binary. The test fails, and never
//! skips, when neither is there.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::filetests::{emit_file, files};

/// The `ptxas` binary: `WEFT_PTXAS`, else the one `scripts/test` installs.
pub fn ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("WEFT_PTXAS") {
        return PathBuf::from(p);
    }
    let installed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas/nvidia/cuda_nvcc/bin/ptxas");
    assert!(
        installed.is_file(),
        "ptxas not found at {}: run scripts/test (it installs the PyPI wheel \
         nvidia-cuda-nvcc-cu12 into target/ptxas) or set WEFT_PTXAS",
        installed.display()
    );
    installed
}

/// Assembles `ptx` for `arch`; the error holds ptxas' messages.
pub fn assemble(ptx: &str, arch: &str, name: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("weft-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join(format!("{name}.ptx"));
    let out = dir.join(format!("{name}.{arch}.cubin"));
    std::fs::write(&src, ptx).map_err(|e| e.to_string())?;
    let run = Command::new(ptxas())
        .arg(format!("-arch={arch}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run ptxas: {e}"))?;
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

#[test]
fn ptxas_assembles_every_filetest_module() {
    let mut assembled = 0;
    let mut failures = Vec::new();
    for f in files() {
        let Ok(module) = emit_file(&f).unwrap() else {
            continue;
        };
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        for arch in ["sm_80", "sm_90"] {
            match assemble(&module.text, arch, &name) {
                Ok(()) => assembled += 1,
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(assembled >= 10, "only {assembled} modules assembled");
}
