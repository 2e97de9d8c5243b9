//! The integration tests of `weft-cpu`, in one test binary: the public API, errors, loops,
//! lowered math, operators, SIMD paths, prefetches, reductions, deferred stores, vector code and the wide
//! (AVX2 and AVX-512) bodies, each against an independent reference.

mod api;
mod cache;
mod collision;
mod deferred;
mod errors;
mod function_cache;
mod gather;
mod lanes;
mod loops;
#[path = "../../../ir/tests/all/common/math_cases.rs"]
mod math_cases;
mod math_lowered;
mod ops;
mod pairs;
mod paths;
mod prefetch;
mod quick;
mod reduce;
mod rows_product;
mod simd;
mod splat;
mod strips;
mod unsigned;
mod util;
mod wide;
