//! The HTTP/JSON API (axum): tenants authenticate with bearer tokens, upload blobs, submit
//! jobs, and read their jobs' records, events, logs and files; operators read `/metrics`.
//!
//! | Method and path | What it does |
//! |---|---|
//! | `POST /v1/blobs` | stores the body (a component or an input file); `{"blob": HASH, "bytes": N}` |
//! | `POST /v1/jobs` | `{"component": HASH, "name"?, "args"?, "inputs"?: {NAME: HASH}}`; 202 with the record, at once |
//! | `GET /v1/jobs` | the tenant's jobs |
//! | `GET /v1/jobs/{id}` | its record |
//! | `GET /v1/jobs/{id}/events` | server-sent events: `state`, `stdout` and `stderr` as written, `explain`, `end` |
//! | `GET /v1/jobs/{id}/logs` | `{"stdout", "stderr", "explain"}` once it ended |
//! | `GET /v1/jobs/{id}/files/{name}` | a file of its directory |
//! | `DELETE /v1/jobs/{id}` | cancels it: a queued job at once, a running one at its next check |
//! | `GET /metrics` | Prometheus text |
//! | `GET /v1/health` | `ok` |
//!
//! A missing or unknown token gets 401; another tenant's job is 404, as a job that does not
//! exist; a full queue gets 429 with `Retry-After`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use crate::events::{Event, finished_events, state_event};
use crate::records::{JobRecord, JobState, Stored};
use crate::scheduler::Full;
use crate::service::{Service, now_ms};

/// What handlers share.
#[derive(Clone)]
struct Api {
    svc: Arc<Service>,
    stop: watch::Receiver<bool>,
}

/// The API's routes over `svc`; event streams end when `stop` turns true.
pub fn router(svc: Arc<Service>, stop: watch::Receiver<bool>) -> Router {
    let limit = svc.config.service.max_body_bytes;
    Router::new()
        .route("/v1/health", get(|| async { "ok" }))
        .route("/v1/blobs", post(put_blob))
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/{id}", get(status).delete(cancel))
        .route("/v1/jobs/{id}/events", get(events))
        .route("/v1/jobs/{id}/logs", get(logs))
        .route("/v1/jobs/{id}/files/{name}", get(file))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(Api { svc, stop })
}

/// An error answer: a status and `{"error": message}`, and `Retry-After` for 429.
struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
    fn internal(e: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
    fn not_found(id: u64) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, format!("no job {id}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(json!({"error": self.message}))).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Whether two byte strings are equal, in time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The bearer token of a request.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// The tenant whose token the request carries (every tenant's token is compared).
fn tenant(svc: &Service, headers: &HeaderMap) -> ApiResult<usize> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required (Authorization: Bearer TOKEN)",
        )
    };
    let token = bearer(headers).ok_or_else(unauthorized)?;
    let mut found = None;
    for (i, t) in svc.config.tenants.iter().enumerate() {
        if same(t.token.as_bytes(), token.as_bytes()) {
            found = Some(i);
        }
    }
    found.ok_or_else(unauthorized)
}

/// Job `id`'s record, if it is `tenant`'s (404 otherwise, whoever owns it).
async fn own_job(svc: &Arc<Service>, tenant: usize, id: u64) -> ApiResult<JobRecord> {
    let s = svc.clone();
    let r = blocking(move || s.db.get(id)).await?;
    match r {
        Some(r) if r.tenant == svc.names[tenant] => Ok(r),
        _ => Err(ApiError::not_found(id)),
    }
}

/// Runs database work off the I/O threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> crate::Result<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)
}

async fn put_blob(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    let svc = api.svc.clone();
    let n = body.len();
    let quota = svc.config.tenants[t].upload_bytes;
    match blocking(move || svc.db.put_blob(&svc.names[t], &body, quota, now_ms())).await? {
        Stored::Blob(hash) => Ok((StatusCode::CREATED, Json(json!({"blob": hash, "bytes": n})))),
        Stored::OverQuota { held } => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "tenant `{}` holds {held} bytes of uploads: {n} more would pass its upload quota of {quota}",
                api.svc.names[t]
            ),
        )),
    }
}

/// The body of `POST /v1/jobs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Submit {
    component: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    inputs: BTreeMap<String, String>,
}

/// Whether `name` may name a file in a job's directory: one plain component.
fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

async fn submit(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    let req: Submit = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("the job's JSON: {e}")))?;
    for name in req.inputs.keys() {
        if !plain_file_name(name) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("input name `{name}`: use letters, digits, `.`, `-` and `_` only"),
            ));
        }
    }
    let svc = api.svc.clone();
    let tenant_name = svc.names[t].clone();
    let mut missing = Vec::new();
    for hash in std::iter::once(&req.component).chain(req.inputs.values()) {
        let (s, n, h) = (svc.clone(), tenant_name.clone(), hash.clone());
        if !blocking(move || s.db.has_blob(&n, &h)).await? {
            missing.push(hash.clone());
        }
    }
    if !missing.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("no blob {} was uploaded by this tenant", missing.join(", ")),
        ));
    }
    if let Err(full) = svc.scheduler.reserve(t) {
        let message = match full {
            Full::Tenant => format!(
                "tenant `{tenant_name}` has {} jobs queued, its quota",
                svc.config.tenants[t].max_queued
            ),
            Full::Service => "the service's queue is full".to_string(),
        };
        return Err(ApiError {
            retry_after: Some(1),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
        });
    }
    let record = JobRecord::queued(
        tenant_name,
        req.name.unwrap_or_else(|| "app".into()),
        req.component,
        req.args,
        req.inputs,
        now_ms(),
    );
    let s = svc.clone();
    let record = match blocking(move || s.db.insert(record)).await {
        Ok(r) => r,
        Err(e) => {
            svc.scheduler.release(t);
            return Err(e);
        }
    };
    // Committed and synced: only now is the job accepted.
    svc.events.open(record.id, state_event(&record));
    svc.scheduler.push(t, record.id, true);
    Ok((StatusCode::ACCEPTED, Json(record)))
}

async fn list(State(api): State<Api>, headers: HeaderMap) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    let svc = api.svc.clone();
    let all = blocking(move || svc.db.all()).await?;
    let mine: Vec<JobRecord> = all
        .into_iter()
        .filter(|r| r.tenant == api.svc.names[t])
        .collect();
    Ok(Json(mine))
}

async fn status(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    Ok(Json(own_job(&api.svc, t, id).await?))
}

async fn cancel(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    let mut r = own_job(&api.svc, t, id).await?;
    if r.state.finished() {
        return Ok((StatusCode::OK, Json(r)));
    }
    let svc = api.svc.clone();
    if svc.scheduler.remove(t, id) {
        r.state = JobState::Cancelled;
        r.error = Some("cancelled before it started".into());
        r.finished_ms = Some(now_ms());
        let (s, rec) = (svc.clone(), r.clone());
        blocking(move || s.db.put(&rec, Some(&Default::default()))).await?;
        svc.metrics.finished(t, r.state, &r.stats, 0.0);
        svc.events
            .close(id, finished_events(&r, &Default::default(), true));
        return Ok((StatusCode::OK, Json(r)));
    }
    // On a worker, or about to be: the worker finds the flag set. Over ranks, rank 0's part
    // stops and tells the others (`crate::ranks`).
    svc.cancels
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(id)
        .or_default()
        .cancel();
    Ok((StatusCode::ACCEPTED, Json(r)))
}

async fn logs(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    own_job(&api.svc, t, id).await?;
    let svc = api.svc.clone();
    Ok(Json(blocking(move || svc.db.logs(id)).await?))
}

async fn file(
    State(api): State<Api>,
    headers: HeaderMap,
    Path((id, name)): Path<(u64, String)>,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    let r = own_job(&api.svc, t, id).await?;
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("job {id} has no file `{name}`"),
        )
    };
    if !plain_file_name(&name) || !r.state.finished() {
        return Err(not_found());
    }
    let path = api.svc.db.job_dir(id).join(&name);
    // A regular file only: not a link the application made to elsewhere.
    let read = tokio::task::spawn_blocking(move || {
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() {
            return None;
        }
        std::fs::read(&path).ok()
    })
    .await
    .map_err(ApiError::internal)?;
    let bytes = read.ok_or_else(not_found)?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes))
}

async fn metrics(State(api): State<Api>, headers: HeaderMap) -> ApiResult<impl IntoResponse> {
    if let Some(token) = &api.svc.config.service.metrics_token
        && !bearer(&headers).is_some_and(|b| same(b.as_bytes(), token.as_bytes()))
    {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "metrics need the service's metrics token",
        ));
    }
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        api.svc.metrics_text(),
    ))
}

fn sse(e: &Event) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default().event(e.kind).data(e.data.to_string()))
}

/// What an event stream goes through: the backlog, then the live events, until `end`.
struct Stream {
    backlog: std::vec::IntoIter<Event>,
    live: Option<tokio::sync::broadcast::Receiver<Event>>,
    stop: watch::Receiver<bool>,
    done: bool,
}

async fn events(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> ApiResult<impl IntoResponse> {
    let t = tenant(&api.svc, &headers)?;
    own_job(&api.svc, t, id).await?;
    // Subscribe first, then read the record: a job that ends in between is read finished.
    // A job not live and not finished is between its commit and its stream's opening (a
    // moment): look again.
    let mut tries = 0;
    let stream = loop {
        if let Some((backlog, rx)) = api.svc.events.subscribe(id) {
            break Stream {
                backlog: backlog.into_iter(),
                live: Some(rx),
                stop: api.stop.clone(),
                done: false,
            };
        }
        let svc = api.svc.clone();
        let (r, logs) = blocking(move || {
            let r = svc.db.get(id)?;
            Ok((r, svc.db.logs(id)?))
        })
        .await?;
        let r = r.ok_or_else(|| ApiError::not_found(id))?;
        if r.state.finished() || tries >= 1000 {
            break Stream {
                backlog: finished_events(&r, &logs, true).into_iter(),
                live: None,
                stop: api.stop.clone(),
                done: false,
            };
        }
        tries += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let events = futures_util::stream::unfold(stream, |mut s| async move {
        if s.done {
            return None;
        }
        if let Some(e) = s.backlog.next() {
            s.done = e.kind == "end";
            return Some((sse(&e), s));
        }
        let rx = s.live.as_mut()?;
        let next = tokio::select! {
            e = rx.recv() => e.ok(),
            _ = s.stop.wait_for(|&stop| stop) => None,
        };
        let e = next?;
        s.done = e.kind == "end";
        Some((sse(&e), s))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(10))))
}
