//! `jit`: every recorded kernel ([`crate::record`]) loaded into one fresh GPU back end, as
//! the runtime would prepare it: the PTX emitted, then the module loaded (the driver's JIT
//! compiles it). Per module: the PTX's size, the emission time and the load time (the
//! back end's prepare time less a separate emission: the first load, of the variant a launch
//! runs by default), then the other variant's load (`other_ms`, which a launch whose offsets
//! do not fit in 32 bits would pay); summed up as medians and maxima, with the slowest modules
//! and every failure with its error (which quotes the driver's log).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use weft::Device;
use weft_examples::AppError;
use weft_ptx::PtxBackend;
use weft_runtime::{Backend, KernelEntry, Owner, Prepared};

use crate::cli::JitArgs;
use crate::outcome::{median, note, num};

/// How long a module took.
struct Timed {
    name: String,
    bytes: usize,
    emit_ms: f64,
    load_ms: f64,
    other_ms: f64,
}

/// Runs the stage.
pub fn run(a: &JitArgs, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let texts = match &a.kernels {
        Some(path) => {
            out.insert("kernels_file".into(), path.display().to_string().into());
            crate::record::read(path)?
        }
        None => crate::record::texts(&crate::record::kernels()?)?,
    };
    if texts.is_empty() {
        return Err("no kernels to load".into());
    }
    let mut entries = Vec::with_capacity(texts.len());
    for (name, text) in &texts {
        let kernel = weft_ir::text::parse(text).map_err(|e| format!("kernel `{name}`: {e}"))?;
        entries.push(Arc::new(KernelEntry::from_passes(kernel)?));
    }
    let start = Instant::now();
    let (timed, failures) = match a.common.device {
        Device::Gpu => load_all(&mut PtxBackend::new(0)?, &entries),
        Device::Sim => load_all(&mut PtxBackend::simulated(), &entries),
        Device::Cpu => return Err("jit loads PTX: --device gpu or sim".into()),
    };
    let emit: Vec<f64> = timed.iter().map(|t| t.emit_ms).collect();
    let load: Vec<f64> = timed.iter().map(|t| t.load_ms).collect();
    let other: Vec<f64> = timed.iter().map(|t| t.other_ms).collect();
    let max = |v: &[f64]| v.iter().copied().fold(0.0f64, f64::max);
    let mut slowest: Vec<&Timed> = timed.iter().collect();
    slowest.sort_by(|p, q| q.load_ms.total_cmp(&p.load_ms));
    let row = |t: &Timed| {
        json!({
            "name": t.name,
            "ptx_bytes": t.bytes,
            "emit_ms": num(t.emit_ms),
            "load_ms": num(t.load_ms),
            "other_ms": num(t.other_ms),
        })
    };
    out.insert("count".into(), entries.len().into());
    out.insert("loaded".into(), timed.len().into());
    out.insert("failed".into(), failures.len().into());
    out.insert("emit_ms_median".into(), num(median(&emit)));
    out.insert("emit_ms_max".into(), num(max(&emit)));
    out.insert("load_ms_median".into(), num(median(&load)));
    out.insert("load_ms_max".into(), num(max(&load)));
    out.insert("load_ms_total".into(), num(load.iter().sum()));
    out.insert("other_ms_median".into(), num(median(&other)));
    out.insert("other_ms_max".into(), num(max(&other)));
    out.insert("wall_seconds".into(), num(start.elapsed().as_secs_f64()));
    out.insert(
        "ptx_bytes_max".into(),
        timed.iter().map(|t| t.bytes).max().unwrap_or(0).into(),
    );
    out.insert(
        "slowest".into(),
        Value::Array(slowest.iter().take(10).map(|t| row(t)).collect()),
    );
    out.insert(
        "modules".into(),
        Value::Array(
            timed
                .iter()
                .map(|t| {
                    json!([
                        t.name,
                        t.bytes,
                        num(t.emit_ms),
                        num(t.load_ms),
                        num(t.other_ms)
                    ])
                })
                .collect(),
        ),
    );
    out.insert("failures".into(), Value::Array(failures.clone()));
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} modules failed to load",
            failures.len(),
            entries.len()
        )
        .into())
    }
}

/// Loads every entry into `b`: the modules that loaded, timed, and the failures.
fn load_all<D: weft_ptx::device::Device>(
    b: &mut PtxBackend<D>,
    entries: &[Arc<KernelEntry>],
) -> (Vec<Timed>, Vec<Value>) {
    let (mut timed, mut failures) = (Vec::new(), Vec::new());
    for (i, e) in entries.iter().enumerate() {
        if i % 20 == 0 {
            note(
                "jit",
                &format!("module {} of {}: {:.80}", i + 1, entries.len(), e.name()),
            );
        }
        let start = Instant::now();
        let module = match weft_ptx::emit(e.ir()) {
            Ok(m) => m,
            Err(err) => {
                failures.push(json!({"name": e.name(), "phase": "emit", "error": err.to_string()}));
                continue;
            }
        };
        let emit_ms = start.elapsed().as_secs_f64() * 1e3;
        match b.prepare(e, Owner::RUNTIME) {
            Ok(Prepared::Compiled(t)) => match b.load_every_variant(e.id()) {
                Ok(other) => timed.push(Timed {
                    name: e.name().to_string(),
                    bytes: module.variants[1].len(),
                    emit_ms,
                    load_ms: (t.as_secs_f64() * 1e3 - emit_ms).max(0.0),
                    other_ms: other.as_secs_f64() * 1e3,
                }),
                Err(err) => failures.push(
                    json!({"name": e.name(), "phase": "load (other variant)", "error": err.to_string()}),
                ),
            },
            Ok(_) => failures.push(json!({"name": e.name(), "phase": "load",
                "error": "already prepared: two recorded kernels are one"})),
            Err(err) => {
                failures.push(json!({"name": e.name(), "phase": "load", "error": err.to_string()}))
            }
        }
    }
    (timed, failures)
}
