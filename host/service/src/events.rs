//! Each live job's stream of events, for `GET /v1/jobs/{id}/events`: its state changes, its
//! standard output and error as the application writes them, and its fusion summaries when
//! it ends. A job is live
//! from its submission until its final record is committed; a subscriber gets what was sent
//! so far (the backlog) and then what comes. A finished job's events are rebuilt from its
//! record and logs instead ([`finished_events`]).

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::json;
use tokio::sync::broadcast;

use crate::records::{JobLogs, JobRecord};

/// One event: its kind (`state`, `stdout`, `stderr`, `explain`, `end`) and its JSON data.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its kind, the SSE `event:` field.
    pub kind: &'static str,
    /// Its data, the SSE `data:` field.
    pub data: serde_json::Value,
}

/// The events of a record's state.
pub fn state_event(r: &JobRecord) -> Event {
    Event {
        kind: "state",
        data: json!({
            "id": r.id,
            "state": r.state,
            "exit_status": r.exit_status,
            "error": r.error,
        }),
    }
}

/// The events that end a job: its final state, its output (unless it was streamed as it
/// was written: `with_output` false), its summaries, and `end`.
pub fn finished_events(r: &JobRecord, logs: &JobLogs, with_output: bool) -> Vec<Event> {
    let mut out = vec![state_event(r)];
    if with_output && !logs.stdout.is_empty() {
        out.push(Event {
            kind: "stdout",
            data: json!(logs.stdout),
        });
    }
    if with_output && !logs.stderr.is_empty() {
        out.push(Event {
            kind: "stderr",
            data: json!(logs.stderr),
        });
    }
    for e in &logs.explain {
        out.push(Event {
            kind: "explain",
            data: json!(e),
        });
    }
    out.push(Event {
        kind: "end",
        data: json!({"id": r.id, "state": r.state}),
    });
    out
}

struct Live {
    backlog: Vec<Event>,
    /// Whether events were left out of the backlog (past [`BACKLOG`]).
    truncated: bool,
    tx: broadcast::Sender<Event>,
}

/// The live jobs' streams.
#[derive(Default)]
pub struct Events {
    live: Mutex<HashMap<u64, Live>>,
}

/// The most events a slow subscriber may fall behind by before its stream ends.
const CHANNEL: usize = 256;

/// The most events a live job's backlog keeps for subscribers who come later (an
/// application writing its output one byte at a time would otherwise grow it without
/// bound); past it, one `truncated` event stands for the rest, which subscribers already
/// there still get, and which the job's logs hold once it ends.
pub const BACKLOG: usize = 1024;

impl Events {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Job `id` is live, with `first` as its first event.
    pub fn open(&self, id: u64, first: Event) {
        let (tx, _) = broadcast::channel(CHANNEL);
        self.lock().insert(
            id,
            Live {
                backlog: vec![first],
                truncated: false,
                tx,
            },
        );
    }

    /// Sends an event of live job `id` (nothing where it is not live).
    pub fn send(&self, id: u64, event: Event) {
        if let Some(live) = self.lock().get_mut(&id) {
            let _ = live.tx.send(event.clone());
            if live.backlog.len() < BACKLOG {
                live.backlog.push(event);
            } else if !live.truncated {
                live.truncated = true;
                live.backlog.push(Event {
                    kind: "truncated",
                    data: json!("later events are not kept for new subscribers; the job's logs hold its output once it ends"),
                });
            }
        }
    }

    /// Sends job `id`'s last events and ends its stream.
    pub fn close(&self, id: u64, last: Vec<Event>) {
        if let Some(live) = self.lock().remove(&id) {
            for e in last {
                let _ = live.tx.send(e);
            }
        }
    }

    /// The backlog and the rest of live job `id`'s events; `None` where it is not live
    /// (finished: read its record).
    pub fn subscribe(&self, id: u64) -> Option<(Vec<Event>, broadcast::Receiver<Event>)> {
        self.lock()
            .get(&id)
            .map(|l| (l.backlog.clone(), l.tx.subscribe()))
    }

    /// Live jobs.
    pub fn live(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(i: usize) -> Event {
        Event {
            kind: "stdout",
            data: json!(i.to_string()),
        }
    }

    #[test]
    fn the_backlog_is_bounded_and_says_so_while_subscribers_get_everything() {
        let events = Events::default();
        events.open(1, output(0));
        let (_, mut early) = events.subscribe(1).expect("live");
        for i in 1..(BACKLOG * 3) {
            events.send(1, output(i));
            // The early subscriber keeps up, and gets every event.
            let got = early.try_recv().expect("an event");
            assert_eq!(got, output(i));
        }
        let (backlog, _) = events.subscribe(1).expect("live");
        assert_eq!(backlog.len(), BACKLOG + 1);
        assert_eq!(backlog[BACKLOG - 1], output(BACKLOG - 1));
        assert_eq!(backlog[BACKLOG].kind, "truncated");
        events.close(1, vec![]);
        assert!(events.subscribe(1).is_none());
    }
}
