//! A served request's `REPLY` as the HTTP response, and the error answers
//! in the one JSON envelope.

use anypath_rest::reply::ReplyError;
use anypath_rest::{ErrorEnvelope, RequestContext, list_answer};
use serde_json::Value;
use spin_sdk::http::{Method, Request, Response};

use crate::log::Committed;

/// A finished response plus what the log line needs.
pub struct Outcome {
    pub response: Response,
    pub status: u16,
    /// A short word for the log line.
    pub detail: &'static str,
}

/// A JSON answer with the request id.
pub fn json(status: u16, body: &Value, request_id: &str, detail: &'static str) -> Outcome {
    let response = Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("x-request-id", request_id)
        .body(serde_json::to_vec(body).unwrap_or_default())
        .build();
    Outcome { response, status, detail }
}

/// An error answer in the envelope (`{"error": {"code", "message", "request_id"}}`).
pub fn error(status: u16, code: &str, message: String, request_id: &str, detail: &'static str) -> Outcome {
    let envelope = ErrorEnvelope::new(code, message, request_id);
    json(status, &serde_json::to_value(envelope).unwrap_or(Value::Null), request_id, detail)
}

/// The response of a request served and committed: its `REPLY` (a list
/// shaped as the request's query asks), or a 500 that says the changes
/// landed when the reply itself cannot be sent.
pub fn served(reply: &Value, ctx: &RequestContext, request: &Request, committed: &Committed, request_id: &str) -> Outcome {
    let shaped;
    let reply = match (&ctx.list, ctx.segments.last()) {
        (Some(list), Some(resource)) => {
            shaped = list_answer::shape(reply, list, resource, request.path(), request.query());
            &shaped
        }
        _ => reply,
    };
    match to_response(reply, *request.method() == Method::Head, request_id) {
        Ok(outcome) => outcome,
        Err(e) => {
            // The changes are committed: say so, rather than let the request look failed and unwritten.
            let message = format!("the request's changes were committed ({}), but its reply cannot be sent: {e}", committed.describe());
            error(500, "reply_failed", message, request_id, "committed_reply_failed")
        }
    }
}

/// Maps REPLY to the response: JSON body, the block's headers, none for HEAD or 204.
fn to_response(reply: &Value, head: bool, request_id: &str) -> Result<Outcome, ReplyError> {
    let checked = anypath_rest::reply::head(reply)?;
    let status = checked.status;
    let mut builder = Response::builder();
    builder.status(status);
    for (name, value) in &checked.headers {
        builder.header(name, value);
    }
    builder.header("x-request-id", request_id);
    let mut body = reply["body"].clone();
    // Error bodies written by a block get the request id, like the app's own.
    if status >= 400 {
        if let Some(error) = body.get_mut("error").and_then(Value::as_object_mut) {
            error.entry("request_id").or_insert_with(|| Value::String(request_id.to_owned()));
        }
    }
    let response = if status == 204 || status == 304 || body.is_null() {
        builder.build()
    } else {
        if !checked.has_content_type() {
            builder.header("content-type", "application/json");
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        if head {
            builder.header("content-length", bytes.len().to_string());
            builder.build()
        } else {
            builder.body(bytes).build()
        }
    };
    Ok(Outcome { response, status, detail: "ok" })
}
