//! The examples' tests, in one test binary: command lines, `.npy` files read by NumPy, and the
//! solvers.

mod benchmarks;
mod cfd;
mod cli;
mod floors;
mod kmeans;
mod logreg;
mod npbench;
mod numpy_compat;
mod pagerank;
mod program;
mod ranks;
mod solvers;
mod swe;
