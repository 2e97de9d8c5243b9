//! An application's captured standard output and error: kept in memory up to the job's
//! bound (as `wasmtime-wasi`'s `MemoryOutputPipe` keeps them), and each write also handed
//! to a sink as it happens, so a service can stream a job's output while it runs.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Which of its streams an application wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Where each write of a job's output goes as it happens (called on the job's thread, with
/// the bytes the write put in the captured stream).
#[derive(Clone)]
pub struct OutputSink(pub Arc<SinkFn>);

/// What an [`OutputSink`] calls.
pub type SinkFn = dyn Fn(Stream, &[u8]) + Send + Sync;

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink")
    }
}

/// A captured stream that also hands each write to a sink.
#[derive(Clone)]
pub(crate) struct LiveOutput {
    pipe: MemoryOutputPipe,
    stream: Stream,
    sink: OutputSink,
}

impl LiveOutput {
    /// Writes into `pipe` (bounded) and to `sink`.
    pub(crate) fn new(pipe: MemoryOutputPipe, stream: Stream, sink: OutputSink) -> LiveOutput {
        LiveOutput { pipe, stream, sink }
    }
}

impl IsTerminal for LiveOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LiveOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for LiveOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        // The pipe refuses a write past the bound; only what it took goes to the sink.
        self.pipe.write(bytes.clone())?;
        (self.sink.0)(self.stream, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        self.pipe.flush()
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        self.pipe.check_write()
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LiveOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for LiveOutput {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.pipe).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &written {
            (this.sink.0)(this.stream, &buf[..*n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.pipe).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.pipe).poll_shutdown(cx)
    }
}
