//! The PTX check (`WEFT_PTX_CHECK=1`): a back end that runs everything on another one and
//! checks that the GPU back end could run every kernel it prepares: each kernel is emitted as
//! PTX and, where `ptxas` is given, assembled for `sm_80` and `sm_90`. A kernel that does not
//! emit or assemble fails its `prepare` with the reason. `weft` puts it around the CPU back
//! end (see `weft::Config::ptx_check`), so that a whole test suite checks the PTX of every
//! kernel it makes on a machine without a GPU.
//!
//! A module that assembled once is remembered by a hash of its text, in a directory under
//! the system's temporary directory shared by every process (a test suite runs the same
//! kernels in many processes, and `ptxas` costs tens of milliseconds a run): the same text is
//! the same check.

use std::collections::HashSet;
use std::path::PathBuf;

use weft_runtime::{Backend, Observed};

/// `inner`, with every kernel also emitted as PTX and, if `ptxas` is given, assembled (each
/// kernel id once).
pub fn checked(inner: Box<dyn Backend>, ptxas: Option<PathBuf>) -> Observed {
    let mut done = HashSet::new();
    Observed::new(
        inner,
        Box::new(move |kernel| {
            if done.contains(&kernel.id()) {
                return Ok(());
            }
            let fail = |m: String| format!("the PTX check (WEFT_PTX_CHECK) failed: {m}");
            let module = crate::emit(kernel.ir()).map_err(|e| fail(e.to_string()))?;
            if let Some(ptxas) = &ptxas {
                for arch in ["sm_80", "sm_90"] {
                    let marker = assembled_marker(ptxas, &module.text, arch);
                    if marker.as_ref().is_some_and(|m| m.is_file()) {
                        continue;
                    }
                    crate::ptxas::assemble_with(ptxas, &module.text, arch, kernel.name())
                        .map_err(fail)?;
                    if let Some(m) = marker {
                        // A marker that cannot be written only costs a later run its time.
                        let _ = std::fs::write(m, b"");
                    }
                }
            }
            done.insert(kernel.id());
            Ok(())
        }),
    )
}

/// The file that records that `text` assembled for `arch` with this `ptxas`: named by a hash
/// of the three (the assembler by its path, size and time of change), in `weft-ptxas-checked`
/// under the temporary directory (created if missing; `None` if it cannot be).
fn assembled_marker(ptxas: &std::path::Path, text: &str, arch: &str) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let meta = std::fs::metadata(ptxas).ok()?;
    let tool = (ptxas, meta.len(), meta.modified().ok());
    let dir = std::env::temp_dir().join("weft-ptxas-checked");
    std::fs::create_dir_all(&dir).ok()?;
    // Two hashes that see the inputs in different orders: 128 bits, so that two texts never
    // share a marker.
    let mut a = std::collections::hash_map::DefaultHasher::new();
    (text, arch, tool).hash(&mut a);
    let mut b = std::collections::hash_map::DefaultHasher::new();
    (tool, arch, text.len(), text).hash(&mut b);
    Some(dir.join(format!("{:016x}{:016x}-{arch}", a.finish(), b.finish())))
}
