//! The cache of compiled kernel functions through the facade (`Config::component_cache`, its
//! `kernels` directory): a program's second process (here, a second runtime on the same
//! directory) compiles none of the functions the first compiled, and gives the same bits;
//! without a directory nothing is found across runtimes.

use std::path::Path;

use weft::Config;
use weft_examples::black_scholes::{self, Cnd};
use weft_examples::stencil;

/// The bits of the stencil and Black-Scholes, and the runtime's counters of functions.
fn run(cache: Option<&Path>) -> (Vec<u64>, weft::FunctionCounts) {
    let rt = weft::Runtime::new(Config {
        threads: 2,
        component_cache: cache.map(Path::to_path_buf),
        ..Config::default()
    })
    .expect("a runtime");
    let np = weft::Numeric::new(rt, weft_plugin_artifacts::NUMERIC).expect("numeric loads");
    let grid = stencil::initial_grid(&np, 61, 7).expect("the grid");
    stencil::run(&grid, 5).expect("the sweeps");
    let (call, put) = black_scholes::inputs(&np, 1001, 3).price(Cnd::Erf);
    let mut bits = Vec::new();
    for a in [&grid, &call, &put] {
        bits.extend(a.to_vec().expect("reads back").iter().map(|v| v.to_bits()));
    }
    (bits, np.runtime(|rt| rt.functions()))
}

#[test]
fn a_second_runtime_on_the_same_directory_compiles_nothing_again() {
    let dir = std::env::temp_dir().join(format!("weft-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (bits, first) = run(Some(&dir));
    assert!(first.compiled > 0, "{first:?}");
    assert!(
        std::fs::read_dir(dir.join("kernels")).is_ok_and(|d| d.count() > 0),
        "entries were written"
    );
    let (again, second) = run(Some(&dir));
    assert_eq!(again, bits, "the same bits from cached code");
    assert_eq!(second.compiled, 0, "{second:?}");
    assert!(
        second.from_cache >= first.compiled,
        "{second:?} after {first:?}"
    );

    // Without a directory, each runtime compiles its own.
    let (alone, counts) = run(None);
    assert_eq!(alone, bits);
    assert!(counts.compiled >= first.compiled, "{counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
