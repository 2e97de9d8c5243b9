//! The one JSON line each stage prints: `stage`, `device`, `ok`, `seconds` (the stage's wall
//! time), the stage's details, and on failure `error`. A panic inside a stage is caught and
//! reported as its error, so the line is always printed.

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Map, Value};
use weft_examples::AppError;

/// Runs stage `stage` on `device`: `body` fills the details; prints the line and returns the
/// exit code (0 when the stage passed, 1 when it failed).
pub fn run(
    stage: &str,
    device: &str,
    body: impl FnOnce(&mut Map<String, Value>) -> Result<(), AppError>,
) -> ExitCode {
    let mut out = Map::new();
    let start = Instant::now();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| body(&mut out)));
    let error = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("panic: {}", panic_message(&*panic))),
    };
    out.insert("stage".into(), stage.into());
    out.insert("device".into(), device.into());
    out.insert("seconds".into(), start.elapsed().as_secs_f64().into());
    out.insert("ok".into(), error.is_none().into());
    if let Some(e) = &error {
        out.insert("error".into(), e.as_str().into());
        let _ = writeln!(std::io::stderr(), "weft-gpu-check {stage}: error: {e}");
    }
    // A closed stdout cannot be reported anywhere else; the exit code still says it.
    let printed = print_line(&Value::Object(out));
    if error.is_none() && printed.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The line of a command line that did not parse (the message also goes to stderr).
pub fn usage_error(stage: &str, message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
    let mut out = Map::new();
    out.insert("stage".into(), stage.into());
    out.insert("ok".into(), false.into());
    out.insert(
        "error".into(),
        format!("bad command line: {message}").into(),
    );
    let _ = print_line(&Value::Object(out));
}

/// Prints `text` on stdout as it is (the usage).
pub fn print_text(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// Prints one JSON value as one line on stdout.
pub fn print_line(v: &Value) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{v}")?;
    stdout.flush()
}

/// A progress note on stderr (the JSON line is stdout's only line).
pub fn note(stage: &str, text: &str) {
    let _ = writeln!(std::io::stderr(), "[{stage}] {text}");
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// A float for JSON (a non-finite one becomes `null`).
pub fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// The median of `samples` (0 for none).
pub fn median(samples: &[f64]) -> f64 {
    weft_examples::timing::median(samples)
}
