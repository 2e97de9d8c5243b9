//! A trace of kernel runs in Chrome's trace-event format (open it in Perfetto or
//! `chrome://tracing`). Each event is named by the kernel it ran, so a fused kernel shows the
//! plugins and operations it came from.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// One kernel run.
#[derive(Clone, Debug)]
struct Event {
    name: String,
    start_us: f64,
    duration_us: f64,
    points: u64,
}

/// The events of one runtime, written to `path` when the runtime is dropped.
#[derive(Debug)]
pub struct Trace {
    path: PathBuf,
    origin: Instant,
    events: Vec<Event>,
}

impl Trace {
    /// A trace to be written to `path`.
    pub fn new(path: PathBuf) -> Trace {
        Trace {
            path,
            origin: Instant::now(),
            events: Vec::new(),
        }
    }

    /// Records a run of kernel `name` over `points` points that started at `start`.
    pub fn record(&mut self, name: &str, start: Instant, points: u64) {
        let start_us = start.duration_since(self.origin).as_secs_f64() * 1e6;
        self.events.push(Event {
            name: name.to_string(),
            start_us,
            duration_us: start.elapsed().as_secs_f64() * 1e6,
            points,
        });
    }

    /// The trace as JSON.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"traceEvents\":[");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"name\":\"{}\",\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":0,\"tid\":0,\"args\":{{\"points\":{}}}}}",
                escape(&e.name),
                e.start_us,
                e.duration_us,
                e.points
            ));
        }
        out.push_str("]}");
        out
    }

    /// Writes the trace to its file.
    pub fn write(&self) -> std::io::Result<()> {
        let mut file = std::fs::File::create(&self.path)?;
        file.write_all(self.to_json().as_bytes())
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_json_with_escaped_names() {
        let mut t = Trace::new(PathBuf::from("unused"));
        t.record("fused(a.b+c\"d)", Instant::now(), 3);
        let json = t.to_json();
        assert!(json.starts_with("{\"traceEvents\":[{\"name\":\"fused(a.b+c\\\"d)\""));
        assert!(json.contains("\"points\":3"));
    }
}
