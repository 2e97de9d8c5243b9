//! The PTX check (`weft_ptx::checked`, `WEFT_PTX_CHECK=1`): a kernel that emits and assembles prepares on the
//! inner back end; one that does not emit, or does not assemble, fails its `prepare` naming
//! the PTX check and the reason.

use std::sync::Arc;

use weft_ir::Scalar;
use weft_ir::reduction::LoopPartial;
use weft_ptx::checked;
use weft_runtime::{
    Backend, Binding, BufferId, KernelEntry, KernelId, MemoryStats, Owner, Prepared,
};

/// A back end that only counts what it is asked to prepare.
#[derive(Default)]
struct Counting {
    prepared: usize,
}

impl Backend for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn alloc(&mut self, _: u64) -> weft_runtime::Result<BufferId> {
        Ok(BufferId(0))
    }
    fn free(&mut self, _: BufferId) {}
    fn write(&mut self, _: BufferId, _: u64, _: &[u8]) -> weft_runtime::Result<()> {
        Ok(())
    }
    fn read(&mut self, _: BufferId, _: u64, _: &mut [u8]) -> weft_runtime::Result<()> {
        Ok(())
    }
    fn is_prepared(&self, _: &Arc<KernelEntry>) -> bool {
        false
    }
    fn prepare(&mut self, _: &Arc<KernelEntry>, _: Owner) -> weft_runtime::Result<Prepared> {
        self.prepared += 1;
        Ok(Prepared::Cached)
    }
    fn launch(&mut self, _: KernelId, _: &[Binding], _: &[Scalar]) -> weft_runtime::Result<()> {
        Ok(())
    }
    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        Ok(Vec::new())
    }
    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        Ok(())
    }
    fn memory(&self) -> MemoryStats {
        MemoryStats::default()
    }
}

fn entry(file: &str) -> Arc<KernelEntry> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(file);
    let src = std::fs::read_to_string(path).expect("the filetest reads");
    let kernel = weft_ir::text::parse(&src).expect("the filetest parses");
    Arc::new(KernelEntry::new("checked.test", &kernel).expect("the kernel enters"))
}

#[test]
fn kernels_that_emit_and_assemble_pass_the_others_fail_naming_why() {
    let ptxas = weft_ptx::ptxas::find().expect("ptxas is installed");
    let mut b = checked(Box::new(Counting::default()), Some(ptxas));
    b.prepare(&entry("axpy.ir"), Owner::RUNTIME)
        .expect("axpy passes");
    b.prepare(&entry("unsigned.ir"), Owner::RUNTIME)
        .expect("the unsigned storage types pass");
    let err = b
        .prepare(&entry("err_top_level_load_after_loop.ir"), Owner::RUNTIME)
        .expect_err("a kernel the emitter refuses fails")
        .to_string();
    assert!(
        err.contains("PTX check") && err.contains("may have written"),
        "{err}"
    );
    let mut missing = checked(
        Box::new(Counting::default()),
        Some("/nonexistent/ptxas".into()),
    );
    let err = missing
        .prepare(&entry("axpy.ir"), Owner::RUNTIME)
        .expect_err("no ptxas, no pass")
        .to_string();
    assert!(err.contains("cannot run /nonexistent/ptxas"), "{err}");
}

/// A module that assembled once is not assembled again, in this process or another: a
/// second check of the same kernel, by another back end, runs no `ptxas`.
#[test]
fn a_module_that_assembled_once_is_not_assembled_again() {
    use std::os::unix::fs::PermissionsExt;
    let ptxas = weft_ptx::ptxas::find().expect("ptxas is installed");
    let dir = std::env::temp_dir().join(format!("weft-checked-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let log = dir.join("calls");
    let script = dir.join("ptxas");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho call >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            ptxas.display()
        ),
    )
    .expect("the wrapper writes");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .expect("the wrapper runs");
    // A name no earlier run used: the module's text (its comment names the kernel) is new.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/axpy.ir");
    let mut kernel =
        weft_ir::text::parse(&std::fs::read_to_string(path).expect("reads")).expect("parses");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    kernel.name = format!("checked.cache.{}.{nanos}", std::process::id());
    let entry = Arc::new(KernelEntry::new("checked.cache", &kernel).expect("enters"));
    let calls = || {
        std::fs::read_to_string(&log)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let mut first = checked(Box::new(Counting::default()), Some(script.clone()));
    first.prepare(&entry, Owner::RUNTIME).expect("assembles");
    assert_eq!(calls(), 2, "sm_80 and sm_90");
    let mut second = checked(Box::new(Counting::default()), Some(script.clone()));
    second.prepare(&entry, Owner::RUNTIME).expect("remembered");
    assert_eq!(calls(), 2, "no ptxas the second time");
    let _ = std::fs::remove_dir_all(&dir);
}
