//! A client of the service's API, for the `weft` command and the tests: plain HTTP/1.1 over
//! a new connection per request (`hyper`), blocking on its own small runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::json;

use crate::records::{JobLogs, JobRecord};
use crate::{Error, Result};

/// An answer: its status, headers and body.
#[derive(Clone, Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, where the status is a success; otherwise an error with the
    /// server's message.
    pub fn json<T: for<'de> serde::Deserialize<'de>>(&self) -> Result<T> {
        if !(200..300).contains(&self.status) {
            return Err(Error::Client(format!(
                "the server answered {}: {}",
                self.status,
                self.server_message()
            )));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::Client(format!("the server's answer: {e}")))
    }

    /// The `error` of a JSON error body, or the body.
    pub fn server_message(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| self.text())
    }
}

/// A job to submit: its component's bytes, name, arguments and input files.
#[derive(Clone, Debug, Default)]
pub struct Submission {
    /// The application component.
    pub component: Vec<u8>,
    /// Its name (`argv[0]`).
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Input files: name in its directory, contents.
    pub inputs: BTreeMap<String, Vec<u8>>,
}

/// A client of one server, as one tenant.
pub struct Client {
    authority: String,
    token: String,
    rt: tokio::runtime::Runtime,
}

impl Client {
    /// A client of the server at `server` (`http://HOST:PORT`, or `HOST:PORT`) with a
    /// tenant's `token`.
    pub fn new(server: &str, token: &str) -> Result<Client> {
        let authority = server
            .strip_prefix("http://")
            .unwrap_or(server)
            .trim_end_matches('/')
            .to_string();
        if authority.contains('/') || authority.is_empty() {
            return Err(Error::Client(format!(
                "`{server}`: give the server as http://HOST:PORT"
            )));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Client(format!("the client's runtime: {e}")))?;
        Ok(Client {
            authority,
            token: token.to_string(),
            rt,
        })
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<hyper::Response<hyper::body::Incoming>> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::Client(format!(
                "{method} {path} on {}: {what}: {e}",
                self.authority
            ))
        };
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|e| fail("connecting", &e))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail("handshake", &e))?;
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.authority)
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            )
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| fail("building the request", &e))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| fail("sending", &e))
    }

    /// One request; its answer whatever its status.
    pub fn request(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Response> {
        self.rt.block_on(async {
            let res = self.send(method, path, body).await?;
            let status = res.status().as_u16();
            let headers = res
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(|e| Error::Client(format!("{method} {path}: reading the answer: {e}")))?
                .to_bytes()
                .to_vec();
            Ok(Response {
                status,
                headers,
                body,
            })
        })
    }

    /// Uploads a blob; its hash.
    pub fn upload(&self, bytes: Vec<u8>) -> Result<String> {
        let v: serde_json::Value = self.request("POST", "/v1/blobs", bytes)?.json()?;
        v.get("blob")
            .and_then(|b| b.as_str())
            .map(str::to_string)
            .ok_or_else(|| Error::Client("the server gave no blob hash".into()))
    }

    /// Uploads a submission's component and inputs and submits it; the answer to the
    /// submission (202 with the record, or 429 and so on).
    pub fn submit_raw(&self, s: &Submission) -> Result<Response> {
        let component = self.upload(s.component.clone())?;
        let mut inputs = BTreeMap::new();
        for (name, bytes) in &s.inputs {
            inputs.insert(name.clone(), self.upload(bytes.clone())?);
        }
        self.submit_uploaded(&component, &s.name, &s.args, &inputs)
    }

    /// Submits a job whose component and inputs were uploaded before (`inputs`: name in
    /// its directory, blob); the answer (202 with the record, or 429 and so on).
    pub fn submit_uploaded(
        &self,
        component: &str,
        name: &str,
        args: &[String],
        inputs: &BTreeMap<String, String>,
    ) -> Result<Response> {
        let body = json!({"component": component, "name": name, "args": args, "inputs": inputs});
        self.request("POST", "/v1/jobs", body.to_string().into_bytes())
    }

    /// Submits a job; its record, queued.
    pub fn submit(&self, s: &Submission) -> Result<JobRecord> {
        self.submit_raw(s)?.json()
    }

    /// Job `id`'s record.
    pub fn job(&self, id: u64) -> Result<JobRecord> {
        self.request("GET", &format!("/v1/jobs/{id}"), Vec::new())?
            .json()
    }

    /// Cancels job `id`; its record as it was when the cancel was taken.
    pub fn cancel(&self, id: u64) -> Result<JobRecord> {
        self.request("DELETE", &format!("/v1/jobs/{id}"), Vec::new())?
            .json()
    }

    /// Job `id`'s logs.
    pub fn logs(&self, id: u64) -> Result<JobLogs> {
        self.request("GET", &format!("/v1/jobs/{id}/logs"), Vec::new())?
            .json()
    }

    /// File `name` of job `id`'s directory.
    pub fn file(&self, id: u64, name: &str) -> Result<Vec<u8>> {
        let r = self.request("GET", &format!("/v1/jobs/{id}/files/{name}"), Vec::new())?;
        if r.status != 200 {
            return Err(Error::Client(format!(
                "the server answered {}: {}",
                r.status,
                r.server_message()
            )));
        }
        Ok(r.body)
    }

    /// Follows job `id`'s events, calling `on_event(kind, data)` for each, until its `end`
    /// (or `limit` passes).
    pub fn events(
        &self,
        id: u64,
        limit: Duration,
        mut on_event: impl FnMut(&str, &str),
    ) -> Result<()> {
        let path = format!("/v1/jobs/{id}/events");
        self.rt.block_on(async {
            let follow = async {
                let res = self.send("GET", &path, Vec::new()).await?;
                if res.status() != 200 {
                    let status = res.status().as_u16();
                    let body = res.into_body().collect().await.map(|b| b.to_bytes());
                    let text = body.map(|b| String::from_utf8_lossy(&b).into_owned());
                    return Err(Error::Client(format!(
                        "the server answered {status}: {}",
                        text.unwrap_or_default()
                    )));
                }
                let mut body = res.into_body();
                let mut pending = String::new();
                let (mut kind, mut data) = (String::new(), String::new());
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| Error::Client(format!("{path}: {e}")))?;
                    let Some(chunk) = frame.data_ref() else {
                        continue;
                    };
                    pending.push_str(&String::from_utf8_lossy(chunk));
                    while let Some(at) = pending.find('\n') {
                        let line: String = pending.drain(..=at).collect();
                        let line = line.trim_end_matches(['\n', '\r']);
                        if line.is_empty() {
                            if !kind.is_empty() {
                                on_event(&kind, &data);
                                if kind == "end" {
                                    return Ok(());
                                }
                            }
                            kind.clear();
                            data.clear();
                        } else if let Some(k) = line.strip_prefix("event:") {
                            kind = k.trim_start().to_string();
                        } else if let Some(d) = line.strip_prefix("data:") {
                            if !data.is_empty() {
                                data.push('\n');
                            }
                            data.push_str(d.strip_prefix(' ').unwrap_or(d));
                        }
                    }
                }
                Err(Error::Client(format!(
                    "{path}: the stream ended before the job did"
                )))
            };
            tokio::time::timeout(limit, follow)
                .await
                .map_err(|_| Error::Client(format!("job {id} did not end within {limit:?}")))?
        })
    }

    /// Waits for job `id` to end (following its events) and returns its final record.
    pub fn wait(&self, id: u64, limit: Duration) -> Result<JobRecord> {
        self.events(id, limit, |_, _| {})?;
        self.job(id)
    }

    /// The metrics text.
    pub fn metrics(&self) -> Result<String> {
        let r = self.request("GET", "/metrics", Vec::new())?;
        if r.status != 200 {
            return Err(Error::Client(format!("metrics: {}", r.status)));
        }
        Ok(r.text())
    }
}
