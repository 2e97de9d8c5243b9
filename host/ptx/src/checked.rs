//! The PTX check (`WEFT_PTX_CHECK=1`): a back end that runs everything on another one and
//! checks that the GPU back end could run every kernel it prepares: each kernel is emitted as
//! PTX and, where `ptxas` is given, assembled for `sm_80` and `sm_90`. A kernel that does not
//! emit or assemble fails its `prepare` with the reason. `weft` puts it around the CPU back
//! end (see `weft::Config::ptx_check`), so that a whole test suite checks the PTX of every
//! kernel it makes on a machine without a GPU.

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
                    crate::ptxas::assemble_with(ptxas, &module.text, arch, kernel.name())
                        .map_err(fail)?;
                }
            }
            done.insert(kernel.id());
            Ok(())
        }),
    )
}
