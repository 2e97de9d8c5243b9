//! `env`: does the device work at all? In order, each step timed and reported under
//! `checks`: the driver library is found (GPU), a context opens and names its device, a
//! buffer is allocated, written and read back, a device-to-device copy moves a known pattern,
//! one small kernel launches and gives its known result bit for bit, a planted fault (a gather
//! whose index check fails) comes back as a kernel fault naming the kernel while the device
//! keeps working, and the copy probe ([`weft_runtime::Backend::copy_bandwidth`]) measures the
//! device-to-device copy rate. The first step that fails ends the stage; `failed_step` names
//! it.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use weft::Device;
use weft_examples::AppError;
use weft_ir::Scalar;
use weft_ptx::PtxBackend;
use weft_runtime::smallvec::smallvec;
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner, Prepared};

use crate::cli::Common;
use crate::outcome::{median, note, num};

/// The launch check: `out[i] = a * x[i] + y[i]`.
const AXPY: &str = "kernel @weft.check.axpy(%a: f64, %x: store<f64, 1, read>, \
                    %y: store<f64, 1, read>, %out: store<f64, 1, write>) {\n  %0 = param %a\n  \
                    parallel %out (%i) {\n    %1 = load %x[%i]\n    %2 = load %y[%i]\n    \
                    %3 = mul %0, %1\n    %4 = add %3, %2\n    store %out[%i], %4\n  }\n}\n";

/// The planted fault: `out[i] = x[idx[i]]`, run with an index past `x`'s end.
const GATHER: &str = "kernel @weft.check.planted_fault(%x: store<f64, 1, read>, \
                      %idx: store<i64, 1, read>, %out: store<f64, 1, write>) {\n  \
                      parallel %out (%i) {\n    %j = load %idx[%i]\n    %v = load %x[%j]\n    \
                      store %out[%i], %v\n  }\n}\n";

/// Runs the stage on `c.device` (the GPU or the simulator).
pub fn run(c: &Common, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let mut checks = Map::new();
    let result = match c.device {
        Device::Gpu => gpu(c, &mut checks),
        Device::Sim => steps(PtxBackend::simulated(), c, &mut checks),
        Device::Cpu => Err("env checks a GPU back end: --device gpu or sim".into()),
    };
    if let Some((name, _)) = checks.iter().find(|(_, v)| v["ok"] == false) {
        out.insert("failed_step".into(), name.as_str().into());
    }
    out.insert("checks".into(), Value::Object(checks));
    result
}

fn gpu(c: &Common, checks: &mut Map<String, Value>) -> Result<(), AppError> {
    step(checks, "driver", |_| {
        weft_ptx::driver::check_present()?;
        Ok(())
    })?;
    let backend = step(checks, "context", |_| Ok(PtxBackend::new(0)?))?;
    steps(backend, c, checks)
}

/// Runs `f` as step `name`: records `ok`, `ms` and what `f` adds, or the error.
fn step<T>(
    checks: &mut Map<String, Value>,
    name: &str,
    f: impl FnOnce(&mut Map<String, Value>) -> Result<T, AppError>,
) -> Result<T, AppError> {
    note("env", &format!("{name} ..."));
    let mut details = Map::new();
    let start = Instant::now();
    let result = f(&mut details);
    details.insert("ms".into(), num(start.elapsed().as_secs_f64() * 1e3));
    details.insert("ok".into(), result.is_ok().into());
    if let Err(e) = &result {
        details.insert("error".into(), e.to_string().into());
    }
    checks.insert(name.into(), Value::Object(details));
    result.map_err(|e| format!("{name}: {e}").into())
}

/// The steps after the context opened, on any device.
fn steps<D: weft_ptx::device::Device>(
    mut b: PtxBackend<D>,
    c: &Common,
    checks: &mut Map<String, Value>,
) -> Result<(), AppError> {
    step(checks, "device", |d| {
        d.insert("name".into(), b.device_name()?.into());
        Ok(())
    })?;
    step(checks, "memory", |d| memory(&mut b, c, d))?;
    step(checks, "device_copy", |d| device_copy(b.device_mut(), c, d))?;
    step(checks, "launch", |d| launch(&mut b, c, d))?;
    step(checks, "planted_fault", |d| planted_fault(&mut b, d))?;
    step(checks, "copy_probe", |d| copy_probe(&mut b, c, d))?;
    Ok(())
}

fn entry(text: &str) -> Result<Arc<KernelEntry>, AppError> {
    let kernel = weft_ir::text::parse(text)?;
    Ok(Arc::new(KernelEntry::new(&kernel.name.clone(), &kernel)?))
}

fn vector(buffer: BufferId, n: usize, size: usize) -> Binding {
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: smallvec![n as i64],
        strides: smallvec![1],
        origin: smallvec![0],
        view: smallvec![n as u64],
        element_size: size,
        deferred: None,
    }
}

fn upload<T: Copy>(
    b: &mut dyn Backend,
    values: &[T],
    bytes: impl Fn(T) -> [u8; 8],
) -> Result<BufferId, AppError> {
    let data: Vec<u8> = values.iter().flat_map(|&v| bytes(v)).collect();
    let id = b.alloc(data.len() as u64)?;
    b.write(id, 0, &data)?;
    Ok(id)
}

fn download(b: &mut dyn Backend, id: BufferId, n: usize) -> Result<Vec<f64>, AppError> {
    let mut data = vec![0u8; n * 8];
    b.read(id, 0, &mut data)?;
    Ok(data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Allocates, writes and reads back a buffer of a known pattern.
fn memory(b: &mut dyn Backend, c: &Common, d: &mut Map<String, Value>) -> Result<(), AppError> {
    let words: usize = if c.small { 1 << 12 } else { 1 << 23 };
    let pattern: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x0123_4567_89AB_CDEF)
        .collect();
    let id = upload(b, &pattern, u64::to_le_bytes)?;
    let mut back = vec![0u8; words * 8];
    b.read(id, 0, &mut back)?;
    let wrong = back
        .chunks_exact(8)
        .zip(&pattern)
        .filter(|(got, want)| *got != want.to_le_bytes())
        .count();
    b.free(id);
    d.insert("bytes".into(), ((words * 8) as u64).into());
    if wrong > 0 {
        return Err(format!("{wrong} of {words} words read back differ").into());
    }
    Ok(())
}

/// A device-to-device copy of a known pattern, on the device's own allocations.
fn device_copy<D: weft_ptx::device::Device>(
    dev: &mut D,
    c: &Common,
    d: &mut Map<String, Value>,
) -> Result<(), AppError> {
    let bytes: usize = if c.small { 1 << 15 } else { 1 << 26 };
    let pattern: Vec<u8> = (0..bytes)
        .map(|i| (i.wrapping_mul(131) >> 3) as u8)
        .collect();
    let src = dev.alloc(bytes as u64)?;
    let dst = dev.alloc(bytes as u64)?;
    let result = (|| -> Result<Vec<u8>, AppError> {
        dev.write(src, &pattern)?;
        dev.memset_zero(dst, bytes as u64)?;
        dev.copy(dst, src, bytes as u64)?;
        let mut back = vec![0u8; bytes];
        dev.read(dst, &mut back)?;
        Ok(back)
    })();
    dev.free(src);
    dev.free(dst);
    let back = result?;
    d.insert("bytes".into(), (bytes as u64).into());
    match back.iter().zip(&pattern).position(|(a, b)| a != b) {
        Some(i) => Err(format!("byte {i} of the copy is {} (want {})", back[i], pattern[i]).into()),
        None => Ok(()),
    }
}

/// One launch with a known result, checked element by element.
fn launch(b: &mut dyn Backend, c: &Common, d: &mut Map<String, Value>) -> Result<(), AppError> {
    let n: usize = if c.small { 1000 } else { 1_000_003 };
    let axpy = entry(AXPY)?;
    if let Prepared::Compiled(t) = b.prepare(&axpy, Owner::RUNTIME)? {
        d.insert("prepare_ms".into(), num(t.as_secs_f64() * 1e3));
    }
    let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let y = vec![0.5f64; n];
    let bx = upload(b, &x, f64::to_le_bytes)?;
    let by = upload(b, &y, f64::to_le_bytes)?;
    let bo = b.alloc((n * 8) as u64)?;
    let start = Instant::now();
    b.launch(
        axpy.id(),
        &[vector(bx, n, 8), vector(by, n, 8), vector(bo, n, 8)],
        &[Scalar::F64(2.0)],
    )?;
    b.synchronize()?;
    d.insert("run_ms".into(), num(start.elapsed().as_secs_f64() * 1e3));
    let got = download(b, bo, n)?;
    for id in [bx, by, bo] {
        b.free(id);
    }
    let wrong: Vec<usize> = (0..n)
        .filter(|&i| got[i].to_bits() != (2.0 * i as f64 + 0.5).to_bits())
        .collect();
    d.insert("elements".into(), (n as u64).into());
    if let Some(&first) = wrong.first() {
        return Err(format!(
            "{} of {n} elements wrong; element {first} is {} (want {})",
            wrong.len(),
            got[first],
            2.0 * first as f64 + 0.5
        )
        .into());
    }
    Ok(())
}

/// A gather with index 9 of 4: the fault must come back at the next synchronization as a
/// kernel fault naming the kernel, and the same launch with good indices must then run.
fn planted_fault(b: &mut dyn Backend, d: &mut Map<String, Value>) -> Result<(), AppError> {
    let gather = entry(GATHER)?;
    b.prepare(&gather, Owner::RUNTIME)?;
    let x = upload(b, &[10.0f64, 11.0, 12.0, 13.0], f64::to_le_bytes)?;
    let idx = upload(b, &[3i64, 0, 9, 1], i64::to_le_bytes)?;
    let out = b.alloc(32)?;
    let args = [vector(x, 4, 8), vector(idx, 4, 8), vector(out, 4, 8)];
    b.launch(gather.id(), &args, &[])?;
    match b.synchronize() {
        Ok(()) => return Err("the out-of-bounds gather ran without a fault".into()),
        Err(weft_runtime::Error::KernelFault { kernel, message }) => {
            d.insert(
                "fault".into(),
                json!({"kernel": kernel, "message": message}),
            );
            if !kernel.contains("weft.check.planted_fault") {
                return Err(format!("the fault names kernel `{kernel}`, not the gather").into());
            }
        }
        Err(e) => return Err(format!("the fault came back as another error: {e}").into()),
    }
    // The device still works: the same launch, fixed, gives the gathered values.
    let good: Vec<u8> = [3i64, 0, 2, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    b.write(idx, 0, &good)?;
    b.launch(gather.id(), &args, &[])?;
    let got = download(b, out, 4)?;
    for id in [x, idx, out] {
        b.free(id);
    }
    d.insert("after_fault".into(), json!(got));
    if got != [13.0, 10.0, 12.0, 11.0] {
        return Err(format!("after the fault the gather gave {got:?}").into());
    }
    Ok(())
}

/// The copy probe's bytes per copy and samples for `c`.
pub fn probe_size(c: &Common, mib: Option<u64>) -> (u64, usize) {
    match (c.small, mib) {
        (_, Some(m)) => (m << 20, if c.small { 3 } else { 10 }),
        (true, None) => (4 << 20, 3),
        (false, None) => (512 << 20, 10),
    }
}

/// Device-to-device copies, each timed on the device: the median GB/s (read plus written).
fn copy_probe(b: &mut dyn Backend, c: &Common, d: &mut Map<String, Value>) -> Result<(), AppError> {
    let (bytes, samples) = probe_size(c, None);
    let rates = b
        .copy_bandwidth(bytes, samples)?
        .ok_or("the back end has no copy probe")?;
    d.insert("bytes".into(), bytes.into());
    d.insert("samples".into(), json!(rates));
    d.insert("gbs".into(), num(median(&rates)));
    Ok(())
}
