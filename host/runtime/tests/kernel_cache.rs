//! The core's map of plugins' kernels is bounded, and a plugin that floods it evicts its own
//! kernels first: another plugin's kernels stay cached, and an evicted kernel is fetched from
//! its plugin again when a task names it.

use std::cell::Cell;

use weft_runtime::testing::{FakeBackend, scale_kernel};
use weft_runtime::{CacheLimits, Core, NoFusion, PluginId, Settings};

fn flat(factor: f64) -> weft_ir::flat::FlatKernel {
    weft_ir::flat::to_flat(&scale_kernel("k", factor))
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
