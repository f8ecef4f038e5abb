//! The kernel's websocket, `/api/kernels/{id}/channels`: every channel
//! over one socket in JSON text frames. Replies go to the socket that
//! asked; iopub goes to every socket on the kernel.
//!
//! Requests that need the session (execute, complete, inspect,
//! is_complete) queue behind the kernel's running cell, as a kernel's
//! shell serves them one at a time; the others are answered at once, so a
//! client reconnecting during a long cell learns the kernel's state.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code, rejection::WebSocketUpgradeRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::error::JupyterError;
use super::kernels::Kernel;
use super::message::Incoming;
use super::{Jupyter, JupyterCaller, shell};
use crate::interpreter_service::Caller;
use crate::request_id::RequestId;

/// How long a closing socket may take to send what is left and its close
/// frame (a client that stopped reading must not keep it longer).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// `GET /api/kernels/{id}/channels`: the websocket, once the caller and the kernel are known.
pub(crate) async fn connect(
    State(jupyter): State<Arc<Jupyter>>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, JupyterError> {
    open(jupyter, caller, &id, upgrade).await
}

/// `GET /token/{token}/api/kernels/{id}/channels`: the same, the token in the path.
pub(crate) async fn connect_with_path_token(
    State(jupyter): State<Arc<Jupyter>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((token, id)): Path<(String, String)>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, JupyterError> {
    let caller = jupyter.caller_presenting(&headers, Some(token), request_id)?;
    open(jupyter, caller, &id, upgrade).await
}

async fn open(jupyter: Arc<Jupyter>, caller: Caller, id: &str, upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>) -> Result<Response, JupyterError> {
    let kernel = jupyter.kernel(&caller, id).await?;
    let upgrade = upgrade.map_err(|_| JupyterError::new(StatusCode::BAD_REQUEST, "open the kernel's channels as a websocket"))?;
    // Subscribed before the 101 goes out: a client that sends on
    // another socket as soon as this one opens sees every message.
    let iopub = kernel.iopub.subscribe();
    Ok(upgrade.on_upgrade(move |socket| serve(jupyter, caller, kernel, iopub, socket)))
}

/// Serves one socket until the client closes it or the kernel is shut
/// down. A client's close frame is answered at once, as a Jupyter server
/// answers it: a cell the socket started goes on running (its iopub
/// reaches the other sockets), and is never waited for.
async fn serve(jupyter: Arc<Jupyter>, caller: Caller, kernel: Arc<Kernel>, iopub: broadcast::Receiver<Arc<String>>, socket: WebSocket) {
    kernel.connections.fetch_add(1, Ordering::SeqCst);
    let (sink, mut stream) = socket.split();
    let (replies, replies_out) = mpsc::unbounded_channel::<String>();
    let closing = CancellationToken::new();
    let writer = tokio::spawn(write(sink, iopub, replies_out, closing.clone()));
    let (queue, queued) = mpsc::unbounded_channel();
    // Detached: the cells queued here run to their end on their own.
    tokio::spawn(shell::work(jupyter.clone(), caller.clone(), kernel.clone(), queued, replies.clone()));
    let session = Session { jupyter, caller, kernel: kernel.clone(), replies, queue };
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = kernel.gone() => break,
        };
        match message {
            Some(Ok(Message::Text(text))) => match Incoming::parse(text.as_str()) {
                Ok(request) => session.dispatch(request).await,
                Err(e) => tracing::warn!(error = %e, kernel = %kernel.record.id, "an unreadable kernel message was ignored"),
            },
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            // Pings are answered by the server; the legacy protocol has no binary frames.
            Some(Ok(_)) => {}
        }
    }
    drop(session);
    closing.cancel();
    let stopping = writer.abort_handle();
    if tokio::time::timeout(CLOSE_WAIT, writer).await.is_err() {
        stopping.abort();
    }
    kernel.connections.fetch_sub(1, Ordering::SeqCst);
}

/// Sends the socket's frames (iopub, and the replies to its own requests)
/// until `closing`, then closes it: the close frame answering the client's
/// (queued when it was read, sent by the flush), or one of the server's
/// own (1000) when the kernel was shut down. What is left of the replies
/// goes out first (a `shutdown_reply` before the close).
async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut iopub: broadcast::Receiver<Arc<String>>,
    mut replies: mpsc::UnboundedReceiver<String>,
    closing: CancellationToken,
) {
    loop {
        let frame = tokio::select! {
            // iopub first: a reply never overtakes the output before it.
            biased;
            () = closing.cancelled() => break,
            published = iopub.recv() => match published {
                Ok(frame) => frame.as_str().to_owned(),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a slow kernel socket missed iopub messages");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            reply = replies.recv() => match reply {
                Some(frame) => frame,
                None => break,
            },
        };
        if sink.send(Message::Text(frame.into())).await.is_err() {
            break;
        }
    }
    while let Ok(frame) = replies.try_recv() {
        if sink.send(Message::Text(frame.into())).await.is_err() {
            break;
        }
    }
    // Refused once the client has closed: its close frame's answer is queued already.
    let _ = sink.send(Message::Close(Some(CloseFrame { code: close_code::NORMAL, reason: "".into() }))).await;
    let _ = sink.close().await;
}

/// One socket's side of the kernel.
struct Session {
    jupyter: Arc<Jupyter>,
    caller: Caller,
    kernel: Arc<Kernel>,
    replies: mpsc::UnboundedSender<String>,
    queue: mpsc::UnboundedSender<(u64, Incoming)>,
}

/// `shutdown_request`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Shutdown {
    restart: bool,
}

/// `history_request`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct History {
    hist_access_type: String,
    n: Option<usize>,
}

/// `comm_open`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CommOpen {
    comm_id: String,
}

impl Session {
    async fn dispatch(&self, request: Incoming) {
        let kind = request.msg_type().to_owned();
        match kind.as_str() {
            "execute_request" | "complete_request" | "inspect_request" | "is_complete_request" => {
                let _ = self.queue.send((self.kernel.ticket(), request));
            }
            "kernel_info_request" => self.answer(&request, shell::kernel_info(&self.jupyter, &self.kernel)),
            "comm_info_request" => self.answer(&request, json!({ "status": "ok", "comms": {} })),
            "history_request" => {
                let asked: History = request.content().unwrap_or_default();
                self.answer(&request, self.history(&asked));
            }
            "comm_open" => {
                // No comm targets here: close it, as a kernel does for an unknown target.
                let asked: CommOpen = request.content().unwrap_or_default();
                let parent = request.parent_header();
                self.kernel.publish(self.kernel.sender().frame("comm_close", "iopub", &parent, &json!({ "comm_id": asked.comm_id, "data": {} })));
            }
            "interrupt_request" => {
                self.jupyter.service.interrupt(&self.caller, &self.kernel.record.session_id);
                self.reply(&request, json!({ "status": "ok" }));
            }
            "shutdown_request" => {
                let asked: Shutdown = request.content().unwrap_or_default();
                self.reply(&request, json!({ "status": "ok", "restart": asked.restart }));
                let (jupyter, caller, kernel) = (self.jupyter.clone(), self.caller.next_request(), self.kernel.clone());
                tokio::spawn(async move {
                    let done = if asked.restart { jupyter.restart(&caller, &kernel).await } else { jupyter.shut_down(&caller, &kernel).await };
                    if let Err(e) = done {
                        tracing::warn!(kernel = %kernel.record.id, error = %e.message, "a shutdown request failed");
                    }
                });
            }
            // Input replies answer requests this kernel never makes; comm
            // messages have no comm to reach.
            "input_reply" | "comm_msg" | "comm_close" => {}
            other => tracing::debug!(kernel = %self.kernel.record.id, msg_type = other, "an unknown kernel message was ignored"),
        }
    }

    /// Replies to `request` between `busy` and `idle`, as a kernel answers on shell.
    fn answer(&self, request: &Incoming, content: serde_json::Value) {
        shell::around(&self.kernel, request, || self.reply(request, content));
    }

    /// Sends the reply to `request` on its channel to this socket.
    fn reply(&self, request: &Incoming, content: serde_json::Value) {
        let kind = shell::reply_type(request.msg_type());
        let _ = self.replies.send(self.kernel.sender().frame(&kind, request.channel(), &request.parent_header(), &content));
    }

    /// The cells run so far with `store_history`, the last `n` for a tail.
    fn history(&self, asked: &History) -> serde_json::Value {
        let activity = self.kernel.peek();
        let entries = &activity.history;
        let skip = match (asked.hist_access_type.as_str(), asked.n) {
            ("tail", Some(n)) => entries.len().saturating_sub(n),
            _ => 0,
        };
        let history: Vec<_> = entries[skip..].iter().map(|(session, line, input)| json!([session, line, input])).collect();
        json!({ "status": "ok", "history": history })
    }
}
