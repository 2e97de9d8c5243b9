//! Every module the filetests make, assembled offline by NVIDIA's `ptxas` for `sm_80` and
//! `sm_90`: the PTX is valid without a GPU in sight.
//!
//! `ptxas` comes from the PyPI wheel `nvidia-cuda-nvcc-cu12`, which `scripts/test` installs
//! into `target/ptxas` (see `weft_ptx::ptxas`); the test fails, and never skips, when it is
//! missing.

#![allow(clippy::unwrap_used)]

use weft_ptx::ptxas::assemble;

use crate::filetests::{emit_file, files};

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
