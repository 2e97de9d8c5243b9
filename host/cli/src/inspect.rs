//! `weft inspect`: what a component declares.

use clap::ArgMatches;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;
use wasmtime::{Config, Engine};
use weft::Runtime;

/// Prints the component's contract version, imports and exports (and for a plugin, its
/// name and version).
pub fn main(m: &ArgMatches) -> Result<i32, String> {
    let path = m
        .get_one::<String>("component")
        .ok_or("no component given")?;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let engine = Engine::new(&Config::new()).map_err(|e| e.to_string())?;
    let component =
        Component::new(&engine, &bytes).map_err(|e| format!("{path} is not a component: {e:#}"))?;
    let ty = component.component_type();
    let describe = |name: &str, item: &ComponentItem| match item {
        ComponentItem::ComponentInstance(i) => {
            let functions: Vec<String> = i.exports(&engine).map(|(f, _)| f.to_string()).collect();
            format!("{name} ({} items)", functions.len())
        }
        ComponentItem::ComponentFunc(_) => format!("{name} (function)"),
        _ => name.to_string(),
    };
    let imports: Vec<String> = ty
        .imports(&engine)
        .map(|(n, i)| describe(n, &i.ty))
        .collect();
    let exports: Vec<String> = ty
        .exports(&engine)
        .map(|(n, i)| describe(n, &i.ty))
        .collect();
    let contract = imports
        .iter()
        .chain(&exports)
        .filter_map(|n| n.split_whitespace().next())
        .filter_map(|n| n.strip_prefix("weft:plugin/"))
        .filter_map(|n| n.split_once('@').map(|(_, v)| v.to_string()))
        .next();
    let is_plugin = exports.iter().any(|e| e.starts_with("weft:plugin/plugin@"));
    let kind = if is_plugin {
        "plugin"
    } else if imports.iter().any(|i| i.starts_with("wasi:cli/")) {
        "application"
    } else {
        "component"
    };
    let article = if kind == "application" { "an" } else { "a" };
    println!("{path}: {article} {kind} component");
    match &contract {
        Some(v) => println!("  contract: weft:plugin@{v}"),
        None => {
            println!("  contract: none (it neither imports nor exports a weft:plugin interface)")
        }
    }
    if is_plugin {
        let mut rt = Runtime::new(weft::Config::from_env()).map_err(|e| e.to_string())?;
        let id = rt.load(&bytes).map_err(|e| e.to_string())?;
        if let Some((name, version)) = rt.plugin_info(id) {
            println!("  plugin: {name} {version}");
        }
        println!(
            "  kernels: declared per task (the host asks `plugin.kernel-body` for each key it meets)"
        );
    }
    println!("  imports:");
    for i in &imports {
        println!("    {i}");
    }
    println!("  exports:");
    for e in &exports {
        println!("    {e}");
    }
    Ok(0)
}
