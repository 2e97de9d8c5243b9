//! wasmtime's limits on what a component may hold: a component whose core modules ask for
//! more memories, tables, table elements or linear memory than a plugin may have is refused
//! when it is instantiated, with an error that names the limit. The components are built here
//! with `wasm-encoder`: a Rust plugin cannot ask for two memories.

use wasm_encoder::{
    Component, InstanceSection, MemorySection, MemoryType, Module, ModuleArg, ModuleSection,
    RefType, TableSection, TableType,
};
use weft::{Config, Error, PluginError, Runtime};

/// A component that instantiates `module` (which imports nothing).
fn component(module: &Module) -> Vec<u8> {
    let mut c = Component::new();
    c.section(&ModuleSection(module));
    let mut instances = InstanceSection::new();
    instances.instantiate(0, Vec::<(&str, ModuleArg)>::new());
    c.section(&instances);
    c.finish()
}

fn memories(pages: &[u64]) -> Module {
    let mut section = MemorySection::new();
    for &minimum in pages {
        section.memory(MemoryType {
            minimum,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
    }
    let mut m = Module::new();
    m.section(&section);
    m
}

fn tables(elements: &[u64]) -> Module {
    let mut section = TableSection::new();
    for &minimum in elements {
        section.table(TableType {
            element_type: RefType::FUNCREF,
            table64: false,
            minimum,
            maximum: None,
            shared: false,
        });
    }
    let mut m = Module::new();
    m.section(&section);
    m
}

/// The error loading `bytes` gives.
fn load_error(bytes: &[u8]) -> String {
    let mut rt = Runtime::new(Config {
        component_cache: None,
        ..Config::default()
    })
    .expect("runtime");
    let err = rt.load(bytes).expect_err("refused");
    assert!(
        matches!(err, Error::Plugin(PluginError::Load { .. })),
        "{err}"
    );
    err.to_string()
}

#[test]
fn a_component_past_the_instance_limits_is_refused_when_it_is_instantiated() {
    // Controls: what a plugin may have instantiates, and is refused only for lacking the
    // plugin export.
    for fine in [memories(&[1]), tables(&[100, 100])] {
        let err = load_error(&component(&fine));
        assert!(err.contains("weft:plugin/plugin"), "{err}");
    }
    let err = load_error(&component(&memories(&[1, 1])));
    assert!(err.contains("memory count too high"), "{err}");
    let err = load_error(&component(&tables(&[1; 5])));
    assert!(err.contains("table count too high"), "{err}");
    let err = load_error(&component(&tables(&[1_000_000])));
    assert!(
        err.contains("table growth to 1000000 elements refused"),
        "{err}"
    );
    // 300 MiB of linear memory, past the default cap of 256 MiB.
    let err = load_error(&component(&memories(&[4800])));
    assert!(err.contains("the cap is 268435456 bytes"), "{err}");
}
