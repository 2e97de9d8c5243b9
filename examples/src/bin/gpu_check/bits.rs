//! `bits`: every program of [`crate::programs`] on the CPU and on the device, each run in a
//! child process of this binary (`bits-one`) with a time limit, and the bits compared. Every
//! difference is listed (the program, the result, how many elements differ, the first one
//! and both values); a child that fails, crashes or runs out of time is reported as such and
//! the other programs still run. Children not started within `--budget` are reported as
//! skipped.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use weft::Device;
use weft_examples::AppError;

use crate::cli::BitsArgs;
use crate::outcome::{note, num};
use crate::programs::{NAMES, Output};

/// How one child ended.
enum Child {
    /// It printed its outputs.
    Done(Vec<Output>),
    /// It did not: why, for the report.
    Failed(Value),
}

/// The last `max` bytes of `text`, on a character boundary.
pub fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Runs `exe args...` for at most `limit`: its exit status (`None`: killed at the limit),
/// stdout and stderr.
pub fn run_limited(
    exe: &Path,
    args: &[String],
    limit: Duration,
) -> std::io::Result<(Option<std::process::ExitStatus>, String, String)> {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// What an exit status says, for the report.
fn status_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "ended without a status".to_string(),
    }
}

/// Runs `bits-one` for `program` on `device` within `limit`.
fn child(exe: &Path, a: &BitsArgs, program: &str, device: Device, limit: Duration) -> Child {
    let mut args = vec![
        "bits-one".to_string(),
        "--program".to_string(),
        program.to_string(),
        "--device".to_string(),
        device.name().to_string(),
        "--threads".to_string(),
        a.common.threads.to_string(),
    ];
    if a.common.small {
        args.push("--small".to_string());
    }
    let start = Instant::now();
    let (status, stdout, stderr) = match run_limited(exe, &args, limit) {
        Ok(r) => r,
        Err(e) => {
            return Child::Failed(json!({"ok": false, "error": format!("cannot start: {e}")}));
        }
    };
    let seconds = num(start.elapsed().as_secs_f64());
    let line: Option<Value> = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok());
    let stderr_tail = tail(&stderr, 2000);
    match (status, line) {
        (None, _) => Child::Failed(json!({
            "ok": false, "timed_out": true, "seconds": seconds,
            "error": format!("timed out after {:.0} s", limit.as_secs_f64()),
            "stderr_tail": stderr_tail,
        })),
        (Some(status), Some(line)) if status.success() && line["ok"] == true => {
            let outputs = line["outputs"]
                .as_array()
                .map(|outs| {
                    outs.iter()
                        .map(|o| {
                            let name = o["name"].as_str().unwrap_or("?").to_string();
                            let bits = o["bits"]
                                .as_array()
                                .map(|b| b.iter().map(|v| v.as_u64().unwrap_or(0)).collect())
                                .unwrap_or_default();
                            (name, bits)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Child::Done(outputs)
        }
        (Some(status), line) => Child::Failed(json!({
            "ok": false, "seconds": seconds, "status": status_text(status),
            "error": line
                .as_ref()
                .and_then(|l| l["error"].as_str())
                .map_or_else(|| format!("crashed ({})", status_text(status)), str::to_string),
            "stderr_tail": stderr_tail,
        })),
    }
}

/// Every difference between the CPU's outputs and the device's, one object each.
fn differences(program: &str, cpu: &[Output], dev: &[Output]) -> Vec<Value> {
    let mut out = Vec::new();
    if cpu.len() != dev.len() {
        let error = format!(
            "{} results on the device against {} on the CPU",
            dev.len(),
            cpu.len()
        );
        out.push(json!({"program": program, "error": error}));
    }
    for ((name, want), (_, got)) in cpu.iter().zip(dev) {
        if want.len() != got.len() {
            out.push(json!({"program": program, "output": name,
                "error": format!("{} elements on the device against {}", got.len(), want.len())}));
            continue;
        }
        let differ: Vec<usize> = (0..want.len()).filter(|&i| want[i] != got[i]).collect();
        if let Some(&first) = differ.first() {
            out.push(json!({
                "program": program, "output": name,
                "count": differ.len(), "of": want.len(), "first_index": first,
                "cpu": num(f64::from_bits(want[first])), "device": num(f64::from_bits(got[first])),
                "cpu_bits": format!("{:016x}", want[first]),
                "device_bits": format!("{:016x}", got[first]),
            }));
        }
    }
    out
}

/// Runs the stage.
pub fn run(a: &BitsArgs, out: &mut Map<String, Value>) -> Result<(), AppError> {
    if a.common.device == Device::Cpu {
        return Err("bits compares the CPU with --device gpu or sim".into());
    }
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let budget = Duration::from_secs_f64(a.budget);
    let per_child = Duration::from_secs_f64(a.timeout);
    let programs: Vec<&str> = NAMES
        .iter()
        .copied()
        .filter(|p| a.programs.is_empty() || a.programs.iter().any(|q| q == p))
        .collect();
    let (mut records, mut all_differences, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for program in &programs {
        let mut ends = Vec::new();
        for device in [Device::Cpu, a.common.device] {
            let left = budget.saturating_sub(start.elapsed());
            if left < Duration::from_secs(1) {
                ends.push(Child::Failed(
                    json!({"ok": false, "skipped": true, "error": "the stage's budget was spent"}),
                ));
                continue;
            }
            note("bits", &format!("{program} on {}", device.name()));
            ends.push(child(&exe, a, program, device, per_child.min(left)));
        }
        let mut record = Map::new();
        record.insert("program".into(), (*program).into());
        for (device, end) in ["cpu", "device"].iter().zip(&ends) {
            match end {
                Child::Done(outputs) => {
                    record.insert(
                        (*device).into(),
                        json!({"ok": true, "outputs": outputs.len(),
                               "elements": outputs.iter().map(|o| o.1.len()).sum::<usize>()}),
                    );
                }
                Child::Failed(why) => {
                    failed.push(format!(
                        "{program} on {}: {}",
                        if *device == "cpu" {
                            "cpu"
                        } else {
                            a.common.device.name()
                        },
                        why["error"].as_str().unwrap_or("failed")
                    ));
                    record.insert((*device).into(), why.clone());
                }
            }
        }
        if let [Child::Done(cpu), Child::Done(dev)] = &ends[..] {
            let d = differences(program, cpu, dev);
            record.insert("same_bits".into(), d.is_empty().into());
            all_differences.extend(d);
        }
        records.push(Value::Object(record));
    }
    let same = records.iter().filter(|r| r["same_bits"] == true).count();
    out.insert("programs".into(), Value::Array(records));
    out.insert("programs_same_bits".into(), same.into());
    out.insert("differences".into(), Value::Array(all_differences.clone()));
    out.insert("failed_children".into(), json!(failed));
    let mut problems = Vec::new();
    if !all_differences.is_empty() {
        let list: Vec<String> = all_differences
            .iter()
            .map(|d| match (d["output"].as_str(), d["count"].as_u64()) {
                (Some(o), Some(c)) => format!("{o}: {c} of {} differ", d["of"]),
                _ => d["error"].as_str().unwrap_or("differs").to_string(),
            })
            .collect();
        problems.push(format!("bits differ: {}", list.join("; ")));
    }
    if !failed.is_empty() {
        problems.push(format!("children failed: {}", failed.join("; ")));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}
