//! Every kernel the examples make, fused and unfused, emitted as PTX and assembled offline by
//! `ptxas` for `sm_80` and `sm_90`: the GPU back end's code is checked where no GPU is.
//!
//! A back end that wraps the CPU's records each kernel as it is prepared; the programs run on
//! the CPU as usual. The test fails, and never skips, when `ptxas` is missing (`scripts/test`
//! installs it; see `weft_ptx::ptxas`).

use std::sync::Arc;

use weft_examples::kernel_recording::{Seen, recorded, run_examples};

#[test]
fn every_example_kernel_assembles_as_ptx() {
    let seen: Seen = Arc::default();
    for fusion in [true, false] {
        let (np, sp) = recorded(fusion, &seen).expect("the runtime starts");
        run_examples(&np, &sp).expect("the examples run");
    }
    let seen = seen.lock().expect("the recording").clone();
    assert!(seen.len() > 40, "only {} kernels recorded", seen.len());
    assert!(
        seen.keys().any(|name| name.contains("spmv.lanes")),
        "the sparse product in the lane order was recorded"
    );
    let mut unsupported = Vec::new();
    let mut failures = Vec::new();
    let mut assembled = 0;
    for (name, ir) in &seen {
        match weft_ptx::emit(ir)
            .map(|m| m.text)
            .map_err(|e| e.to_string())
        {
            Err(e) => unsupported.push(format!("{name}: {e}")),
            Ok(text) => {
                for arch in ["sm_80", "sm_90"] {
                    match weft_ptx::ptxas::assemble(&text, arch, name) {
                        Ok(()) => assembled += 1,
                        Err(e) => failures.push(e),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        unsupported.is_empty(),
        "{} of {} kernels not emitted:\n{}",
        unsupported.len(),
        seen.len(),
        unsupported.join("\n")
    );
    assert_eq!(assembled, 2 * seen.len());
}
