//! `record`: the kernels `jit` loads. The examples run small on the CPU through
//! `weft_examples::kernel_recording` (the CPU back end observed, fused and unfused), and every
//! kernel the runtime prepared is written as one JSON line, `{"name": ..., "ir": ...}`, the IR
//! in its text form (`weft_ir::text`), exactly as back ends receive it (validated, math
//! lowered). `scripts/gpu-bundle` ships the file next to the binary.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_examples::AppError;
use weft_examples::kernel_recording::{Seen, recorded, run_examples};
use weft_ir::ValidKernel;

use crate::cli::Common;
use crate::outcome::note;

/// Every kernel the examples prepare, fused and unfused, by name.
pub fn kernels() -> Result<BTreeMap<String, ValidKernel>, AppError> {
    let seen: Seen = Arc::default();
    for fusion in [true, false] {
        note("record", &format!("the examples, fusion {fusion}"));
        let (np, sp) = recorded(fusion, &seen)?;
        run_examples(&np, &sp)?;
    }
    let seen = seen.lock().map_err(|_| "the recording was poisoned")?;
    Ok(seen.clone())
}

/// The kernels as the file holds them: name and IR text, each checked to parse back to the
/// same kernel (its values renumbered in definition order, as the parser numbers them).
pub fn texts(kernels: &BTreeMap<String, ValidKernel>) -> Result<Vec<(String, String)>, AppError> {
    let mut out = Vec::with_capacity(kernels.len());
    for (name, ir) in kernels {
        let text = weft_ir::text::print(ir);
        match weft_ir::text::parse(&text) {
            Ok(back) if back == weft_ir::renumber(ir) => out.push((name.clone(), text)),
            Ok(_) => return Err(format!("kernel `{name}` does not print back to itself").into()),
            Err(e) => return Err(format!("kernel `{name}` does not parse back: {e}").into()),
        }
    }
    Ok(out)
}

/// Runs the stage: writes the kernels to `path`.
pub fn run(_: &Common, path: &Path, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let texts = texts(&kernels()?)?;
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
    );
    let mut bytes = 0usize;
    for (name, ir) in &texts {
        let line = json!({"name": name, "ir": ir}).to_string();
        bytes += line.len() + 1;
        writeln!(file, "{line}")?;
    }
    file.flush()?;
    out.insert("kernels".into(), texts.len().into());
    out.insert("bytes".into(), bytes.into());
    out.insert("out".into(), path.display().to_string().into());
    Ok(())
}

/// Reads a file `record` wrote: each kernel's name and IR.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, AppError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
        match (v["name"].as_str(), v["ir"].as_str()) {
            (Some(name), Some(ir)) => out.push((name.to_string(), ir.to_string())),
            _ => return Err(format!("{} line {}: no name or ir", path.display(), i + 1).into()),
        }
    }
    Ok(out)
}
