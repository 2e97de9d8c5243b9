//! The harness's own tests, in one test binary: the harness against the real host with the
//! `stats` plugin (its names, its configuration from the environment, its explanations), and
//! what the host does with a kernel's loads (the guide's section on neighbours).

mod harness;
mod loads;
