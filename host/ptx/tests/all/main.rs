//! The PTX back end's tests: text filetests of the emitter, and every module they make
//! assembled by `ptxas`.

mod backend_sim;
mod checked;
#[cfg(feature = "cuda")]
mod driver;
mod filetests;
mod lanes;
mod ptxas;
mod sim;
mod tree;
