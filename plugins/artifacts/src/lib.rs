//! The workspace's plugins, and its example application components (`APP_*`, from
//! `examples/apps`), built into Wasm components by this crate's build script.
//!
//! Depend on this crate to load the first-party plugins (and the test plugins) without any
//! manual build step: `cargo build`, `cargo run` and `cargo test` build them from source.

#![forbid(unsafe_code)]

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
