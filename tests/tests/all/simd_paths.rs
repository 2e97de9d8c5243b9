//! Whole programs on every SIMD path this CPU runs (`Config::simd`, `WEFT_SIMD`): the stencil
//! (aliasing views, element-wise arithmetic) and Black-Scholes (math-lowered `exp`, `log`,
//! `erf`, `where`), with a max reduction, give the same bits on each; every path the CPU has
//! instructions for runs, one it cannot run and a `WEFT_SIMD` value that names no path stop
//! the runtime from starting with an error that says why.

use weft::{Config, DType, Error, SimdPath};
use weft_examples::black_scholes::{self, Cnd};
use weft_examples::stencil;

fn config(simd: Option<SimdPath>) -> Config {
    Config {
        threads: 2,
        simd,
        component_cache: None,
        ..Config::default()
    }
}

/// The bits of every output of the programs, run on `path`, if this CPU runs it.
fn run(path: SimdPath) -> Option<Vec<u64>> {
    let rt = weft::Runtime::new(config(Some(path))).ok()?;
    let np = weft::Numeric::new(rt, weft_plugin_artifacts::NUMERIC).expect("numeric loads");
    let grid = stencil::initial_grid(&np, 61, 7).expect("the grid");
    stencil::run(&grid, 5).expect("the sweeps");
    let inputs = black_scholes::inputs(&np, 1001, 3);
    let (call, put) = inputs.price(Cnd::Polynomial);
    let (call2, _) = inputs.price(Cnd::Erf);
    let top = call.max();
    let mut bits = Vec::new();
    for a in [&grid, &call, &put, &call2, &top] {
        bits.extend(a.to_vec().expect("reads back").iter().map(|v| v.to_bits()));
    }
    Some(bits)
}

#[test]
fn programs_give_the_same_bits_on_every_available_path() {
    let scalar = run(SimdPath::Scalar).expect("every CPU runs scalar code");
    let mut ran = vec![SimdPath::Scalar];
    for path in [SimdPath::Sse, SimdPath::Avx2, SimdPath::Avx512] {
        if let Some(bits) = run(path) {
            assert!(bits == scalar, "{path} differs from scalar");
            ran.push(path);
        }
    }
    assert!(
        ran.contains(&SimdPath::Sse),
        "x86-64 runs 128-bit vectors: {ran:?}"
    );
    for path in SimdPath::ALL {
        assert_eq!(ran.contains(&path), path.detected(), "{path}: {ran:?}");
    }
}

#[test]
fn paths_the_cpu_cannot_run_and_bad_environment_values_stop_the_runtime() {
    for path in SimdPath::ALL {
        match weft::Runtime::new(config(Some(path))) {
            Ok(_) => assert!(path.detected(), "{path} starts"),
            Err(e) => {
                let e = e.to_string();
                assert!(!path.detected(), "{path}: {e}");
                assert!(
                    e.contains(path.name()) && e.contains("this CPU does not have it"),
                    "{e}"
                );
            }
        }
    }
    let mut bad = config(None);
    bad.env_errors
        .push("WEFT_SIMD=avx1024: not a SIMD path (scalar, sse, avx2 or avx512)".into());
    let e = weft::Runtime::new(bad).err().expect("refused");
    assert!(matches!(e, Error::Usage(_)), "{e}");
    assert!(e.to_string().contains("WEFT_SIMD=avx1024"), "{e}");
    // The default starts, on the widest path.
    let np = weft_tests::numeric_with(config(None));
    assert_eq!(np.zeros(&[2], DType::F64).to_vec().unwrap(), vec![0.0, 0.0]);
}
