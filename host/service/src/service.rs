//! The service: what the API and the workers share, how it starts (opening the job database
//! and recovering from a crash), and how it stops.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use wasmtime::component::Component;
use weft_apps::AppHost;

use crate::config::ServiceConfig;
use crate::events::Events;
use crate::metrics::{Gauges, Metrics};
use crate::records::{JobDb, JobState};
use crate::scheduler::Scheduler;
use crate::{Error, Result};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Compiled application components by `tenant/hash`, the least recently used dropped first.
pub(crate) struct ComponentCache {
    entries: Mutex<Vec<(String, Component, u64)>>,
    capacity: usize,
    clock: std::sync::atomic::AtomicU64,
}

impl ComponentCache {
    fn new(capacity: usize) -> ComponentCache {
        ComponentCache {
            entries: Mutex::new(Vec::new()),
            capacity: capacity.max(1),
            clock: Default::default(),
        }
    }

    /// The component kept under `key`, or the one `make` compiles (then kept).
    pub(crate) fn get_or(
        &self,
        key: &str,
        make: impl FnOnce() -> std::result::Result<Component, String>,
    ) -> std::result::Result<Component, String> {
        let tick = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(entry) = e.iter_mut().find(|(k, _, _)| k == key) {
                entry.2 = tick;
                return Ok(entry.1.clone());
            }
        }
        // Compiled outside the lock: other workers go on meanwhile.
        let component = make()?;
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if !e.iter().any(|(k, _, _)| k == key) {
            if e.len() >= self.capacity
                && let Some(oldest) = e
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, x)| x.2)
                    .map(|(i, _)| i)
            {
                e.swap_remove(oldest);
            }
            e.push((key.to_string(), component.clone(), tick));
        }
        Ok(component)
    }

    /// Components kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// What the API handlers and the workers share.
pub struct Service {
    pub(crate) config: ServiceConfig,
    pub(crate) names: Vec<String>,
    pub(crate) db: JobDb,
    pub(crate) scheduler: Scheduler,
    pub(crate) events: Arc<Events>,
    pub(crate) metrics: Metrics,
    /// The cancel flags of jobs on workers (or about to be), by id.
    pub(crate) cancels: Mutex<HashMap<u64, Arc<weft::CancelToken>>>,
    pub(crate) apps: AppHost,
    pub(crate) components: ComponentCache,
}

/// What a restart found in the job database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Jobs that were queued, queued again.
    pub requeued: usize,
    /// Jobs that were running, now failed with `server restarted`.
    pub failed: usize,
    /// Finished jobs past their retention, deleted (see [`crate::retention`]).
    pub swept: usize,
    /// Uploaded blobs past their retention that no job named, deleted.
    pub blobs_swept: usize,
}

impl Service {
    /// Opens the database under the configured data directory and recovers what a crash
    /// left: queued jobs are queued again (in the order they were accepted), running ones
    /// are failed with `server restarted` (they may have written part of their files).
    pub fn open(config: ServiceConfig) -> Result<(Arc<Service>, Recovered)> {
        let db = JobDb::open(&config.service.data_dir)?;
        let names: Vec<String> = config.tenants.iter().map(|t| t.name.clone()).collect();
        let workers = config.service.workers;
        let service = Arc::new(Service {
            scheduler: Scheduler::new(&config.tenants, config.service.queue_limit),
            metrics: Metrics::new(names.len(), workers),
            events: Arc::new(Events::default()),
            cancels: Mutex::new(HashMap::new()),
            apps: AppHost::new().map_err(|e| Error::Start(e.to_string()))?,
            components: ComponentCache::new(config.service.components_cached),
            names,
            db,
            config,
        });
        let mut recovered = Recovered::default();
        for mut r in service.db.all()? {
            let Some(tenant) = service.tenant_index(&r.tenant) else {
                continue;
            };
            match r.state {
                JobState::Queued => {
                    service.events.open(r.id, crate::events::state_event(&r));
                    service.scheduler.push(tenant, r.id, false);
                    recovered.requeued += 1;
                }
                JobState::Running => {
                    r.state = JobState::Failed;
                    r.error = Some("failed: server restarted".into());
                    r.finished_ms = Some(now_ms());
                    service.db.put(&r, None)?;
                    recovered.failed += 1;
                }
                _ => {}
            }
        }
        let swept = service.sweep(now_ms())?;
        recovered.swept = swept.jobs;
        recovered.blobs_swept = swept.blobs;
        Ok((service, recovered))
    }

    /// The index of the tenant named `name`.
    pub(crate) fn tenant_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The metrics text.
    pub fn metrics_text(&self) -> String {
        let counts = (0..self.names.len())
            .map(|t| self.scheduler.counts(t))
            .collect();
        self.metrics.render(&Gauges {
            names: &self.names,
            counts,
            components_cached: self.components.len(),
            live_jobs: self.events.live(),
        })
    }
}

/// Stops a [`Server`] from any thread, as SIGTERM does.
#[derive(Clone)]
pub struct Stopper(Arc<tokio::sync::Notify>);

impl Stopper {
    /// Asks the server to stop gracefully (see [`Server::serve`]).
    pub fn stop(&self) {
        self.0.notify_one();
    }
}

/// A started service: its workers run, its API answers on [`Server::addr`].
pub struct Server {
    service: Arc<Service>,
    stopper: Stopper,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    workers: Vec<std::thread::JoinHandle<()>>,
    runtime: tokio::runtime::Runtime,
}

impl Server {
    /// Starts the workers and binds the configured address.
    pub fn start(service: Arc<Service>) -> Result<Server> {
        let workers = service.config.service.workers;
        Server::start_with(service, workers)
    }

    /// Binds the configured address, with no worker thread: rank 0's one worker is the
    /// caller of [`Server::serve_on_ranks`].
    pub fn start_on_ranks(service: Arc<Service>) -> Result<Server> {
        Server::start_with(service, 0)
    }

    fn start_with(service: Arc<Service>, threads: usize) -> Result<Server> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weft-serve-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Start(format!("the I/O runtime: {e}")))?;
        let listen = service.config.service.listen.clone();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(&listen))
            .map_err(|e| Error::Start(format!("listening on {listen}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Start(format!("the bound address: {e}")))?;
        let mut workers = Vec::new();
        for w in 0..threads {
            let s = service.clone();
            let handle = std::thread::Builder::new()
                .name(format!("weft-worker-{w}"))
                .spawn(move || crate::worker::work(&s, w, None))
                .map_err(|e| Error::Start(format!("worker thread: {e}")))?;
            workers.push(handle);
        }
        Ok(Server {
            service,
            stopper: Stopper(Arc::new(tokio::sync::Notify::new())),
            listener,
            addr,
            workers,
            runtime,
        })
    }

    /// The address the API answers on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What stops it.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Serves until SIGINT, SIGTERM or its [`Stopper`], then stops gracefully: no new
    /// connections, open event streams end, workers finish the jobs they run, and jobs
    /// still queued stay queued in the database (queued again at the next start).
    pub fn serve(self) -> Result<()> {
        let Server {
            service,
            stopper,
            listener,
            workers,
            runtime,
            ..
        } = self;
        let served = serve_http(&service, listener, &runtime, stopper);
        service.scheduler.stop();
        for w in workers {
            let _ = w.join();
        }
        served
    }

    /// As [`Server::serve`], on rank 0 of `ranks` (from [`Server::start_on_ranks`]): the API
    /// on a thread of its own, and the one worker here, sending each job to the other ranks
    /// (which run [`crate::follow`]) and, at the end, the stop.
    pub fn serve_on_ranks(self, ranks: &weft::Ranks) -> Result<()> {
        let Server {
            service,
            stopper,
            listener,
            runtime,
            ..
        } = self;
        let svc = service.clone();
        let http = std::thread::Builder::new()
            .name("weft-serve-http".into())
            .spawn(move || {
                let served = serve_http(&svc, listener, &runtime, stopper);
                svc.scheduler.stop();
                served
            })
            .map_err(|e| Error::Start(format!("the API's thread: {e}")))?;
        crate::worker::work(&service, 0, Some(ranks));
        let stopped = crate::ranks::send_stop(ranks);
        let served = http
            .join()
            .map_err(|_| Error::Start("the API's thread panicked".into()))?;
        served.and(stopped)
    }
}

/// Serves the API on `runtime` until SIGINT, SIGTERM or `stopper`, then ends the event
/// streams and waits for the open connections.
fn serve_http(
    service: &Arc<Service>,
    listener: tokio::net::TcpListener,
    runtime: &tokio::runtime::Runtime,
    stopper: Stopper,
) -> Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let app = crate::api::router(service.clone(), stop_rx);
    let svc = service.clone();
    let every = std::time::Duration::from_secs(service.config.service.sweep_s);
    runtime
        .block_on(async move {
            // Finished jobs and unnamed blobs past their retention, every `sweep_s` (the
            // first sweep was at open).
            let sweeper = tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let s = svc.clone();
                    if let Ok(Err(e)) = tokio::task::spawn_blocking(move || s.sweep(now_ms())).await
                    {
                        eprintln!("weft serve: sweeping finished jobs: {e}");
                    }
                }
            });
            let signal = async move {
                tokio::select! {
                    _ = stopper.0.notified() => {}
                    _ = terminate() => {}
                }
                let _ = stop_tx.send(true);
            };
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await;
            sweeper.abort();
            served
        })
        .map_err(|e| Error::Start(format!("serving: {e}")))
}

/// SIGINT or SIGTERM.
async fn terminate() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
