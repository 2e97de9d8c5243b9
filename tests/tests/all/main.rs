//! The cross-crate tests, in one test binary: the examples against plain-Rust references,
//! fusion (fused against unfused), numeric operations, sandboxing and sparse matrices; the GPU
//! back end on the simulated GPU against the CPU's bits (every example, and 2 ranks).

mod app_kernels;
mod complex;
mod counting;
mod examples_black_scholes;
mod examples_jacobi;
mod examples_stencil;
mod fusion;
mod fusion_differential;
mod gpu_bits;
mod gpu_check;
mod grid_products;
mod hostile;
mod in_place;
mod interop;
mod kernel_cache;
mod linalg;
mod ndarray_interop;
mod numeric_ops;
mod numpy_ops;
mod numpy_pieces;
mod numpy_views;
mod ptx_modules;
mod ranks;
mod readme;
mod replay;
mod reproducible;
mod sandbox;
mod shared_window;
mod sim_examples;
mod sim_ranks;
mod simd_paths;
mod sorting;
mod sparse;
mod stats;
mod stencil_fusion;
mod template;
mod tenants;
mod traced_steps;
mod unsigned;
mod wasm_limits;
