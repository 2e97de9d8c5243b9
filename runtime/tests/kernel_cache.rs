//! The core's map of plugins' kernels is bounded, and a plugin that floods it evicts its own
//! kernels first: another plugin's kernels stay cached, and an evicted kernel is fetched from
//! its plugin again when a task names it.

use std::cell::Cell;

use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::testing::FakeBackend;
use weft_runtime::{CacheLimits, Core, NoFusion, PluginId, Settings};

fn flat(factor: f64) -> weft_ir::flat::FlatKernel {
    let mut b = KernelBuilder::new("k");
    let a = b.store(DType::F64, 1, Privilege::Read);
    let out = b.store(DType::F64, 1, Privilege::Write);
    b.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let f = b.const_f64(factor);
        let y = b.mul(x, f);
        b.store(out, i, y);
    });
    weft_ir::flat::to_flat(&b.finish())
}

#[test]
fn a_plugin_that_floods_the_kernel_map_evicts_its_own_kernels_first() {
    let mut core = Core::new(
        Settings::default(),
        Box::new(FakeBackend::default()),
        Box::new(NoFusion),
    );
    core.set_kernel_cache_limits(CacheLimits {
        entries: 16,
        bytes: u64::MAX,
    });
    let fetches = Cell::new(0u32);
    let kernel = |core: &mut Core, plugin: u32, key: &str| {
        core.kernel(PluginId(plugin), &format!("p{plugin}"), key, || {
            fetches.set(fetches.get() + 1);
            Ok(flat(2.0))
        })
        .expect("a kernel")
    };
    for k in 0..4 {
        kernel(&mut core, 1, &format!("quiet{k}"));
    }
    for k in 0..500 {
        kernel(&mut core, 2, &format!("flood{k}"));
        assert!(core.kernel_cache_stats().entries <= 16);
    }
    assert_eq!(fetches.get(), 504);
    // The quiet plugin's kernels were never evicted: no fetch.
    for k in 0..4 {
        kernel(&mut core, 1, &format!("quiet{k}"));
    }
    assert_eq!(fetches.get(), 504);
    // The flooder's first kernel was: it is fetched again.
    kernel(&mut core, 2, "flood0");
    assert_eq!(fetches.get(), 505);
}
