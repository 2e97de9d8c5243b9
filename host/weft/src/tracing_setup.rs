//! Where Weft's `tracing` output goes: a Chrome/Perfetto trace file (`WEFT_TRACE`, written by
//! `tracing-chrome`) and the planner's explanations on standard error (`WEFT_EXPLAIN`: the
//! summaries of the window's runs at level 1, every decision in full at level 2).
//!
//! The runtime, the planner and the plugin host report through `tracing` spans (a plugin call,
//! a kernel run, a compile) and events (explanations) and install nothing. A
//! [`Runtime`](crate::Runtime) whose configuration asks for either output builds one subscriber
//! for itself and makes it the current one only while it works, so two runtimes in one process
//! (or an application's own subscriber) do not mix.

use std::fmt::Write as _;
use std::path::Path;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Dispatch, Event, Subscriber};
use tracing_chrome::{ChromeLayerBuilder, EventOrSpan, FlushGuard};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};
use weft_runtime::{EXPLAIN_TARGET, SUMMARY_TARGET};

use crate::{Error, Result};

/// A runtime's subscriber, and the guard that finishes its trace file when dropped.
pub struct Tracing {
    /// The subscriber.
    pub dispatch: Dispatch,
    /// A second, silent dispatcher kept alive beside `dispatch`. `tracing-core` caches each
    /// callsite's interest when the callsite is first hit; while only one dispatcher is
    /// registered it asks the *hitting thread's* current one, so a callsite first hit by
    /// another thread (another runtime without tracing) would be cached as "never" and this
    /// runtime's spans there lost. With two registered it asks every live dispatcher, and
    /// this one's spans are recorded whichever thread hit the callsite first.
    _companion: Dispatch,
    _flush: Option<FlushGuard>,
}

impl Tracing {
    /// A subscriber that writes a Chrome trace to `trace` (if given) and prints on standard
    /// error (with `explain`) the summaries of the window's runs, or every explanation in full
    /// (with `detail` too); `None` when neither is asked for.
    pub fn new(trace: Option<&Path>, explain: bool, detail: bool) -> Result<Option<Tracing>> {
        let explain = explain.then_some(ExplainToStderr {
            target: if detail {
                EXPLAIN_TARGET
            } else {
                SUMMARY_TARGET
            },
        });
        if trace.is_none() && explain.is_none() {
            return Ok(None);
        }
        let (chrome, flush) = match trace {
            Some(path) => {
                let file = std::fs::File::create(path).map_err(|source| {
                    Error::Io(weft_io::Error::Io {
                        context: format!("cannot create the trace file {}", path.display()),
                        source,
                    })
                })?;
                let (layer, guard) = ChromeLayerBuilder::new()
                    .writer(file)
                    .include_args(true)
                    .name_fn(Box::new(provenance_name))
                    .build();
                (Some(layer), Some(guard))
            }
            None => (None, None),
        };
        let subscriber = Registry::default()
            .with(Provenance)
            .with(chrome)
            .with(explain);
        Ok(Some(Tracing {
            _companion: Dispatch::new(tracing::subscriber::NoSubscriber::default()),
            dispatch: Dispatch::new(subscriber),
            _flush: flush,
        }))
    }
}

/// A span's name as traces show it: its kernel, or its plugin and call.
struct SpanName(String);

/// Records [`SpanName`] for every span that carries provenance.
struct Provenance;

#[derive(Default)]
struct Fields {
    kernel: Option<String>,
    plugin: Option<String>,
    call: Option<String>,
    message: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "kernel" => self.kernel = Some(value.to_string()),
            "plugin" => self.plugin = Some(value.to_string()),
            "call" => self.call = Some(value.to_string()),
            "message" => self.message.push_str(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Provenance {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let name = match (fields.kernel, fields.plugin, fields.call) {
            (Some(kernel), _, _) if attrs.metadata().name() == "kernel" => kernel,
            (Some(kernel), _, _) => format!("{}: {kernel}", attrs.metadata().name()),
            (None, Some(plugin), Some(call)) => format!("{plugin}.{call}"),
            _ => return,
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanName(name));
        }
    }
}

fn provenance_name<S>(e: &EventOrSpan<'_, '_, S>) -> String
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    match e {
        EventOrSpan::Span(span) => span
            .extensions()
            .get::<SpanName>()
            .map_or_else(|| span.name().to_string(), |n| n.0.clone()),
        EventOrSpan::Event(event) => event.metadata().target().to_string(),
    }
}

/// Prints the events of one target on standard error: the planner's explanations in full
/// ([`EXPLAIN_TARGET`]) or the summaries of the window's runs ([`SUMMARY_TARGET`]).
struct ExplainToStderr {
    target: &'static str,
}

impl<S: Subscriber> Layer<S> for ExplainToStderr {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == self.target {
            let mut fields = Fields::default();
            event.record(&mut fields);
            eprint!("{}", fields.message);
        }
    }
}
