//! Handing an answer to the host whole.
//!
//! spin-sdk's `#[http_component]` hands the response's head to the host
//! first and writes the body after it. The host's HTTP server may send the
//! head in a segment of its own before the body arrives; the body, a second
//! small segment, then waits under Nagle's algorithm for the client's
//! delayed acknowledgement: about 40 ms on a kept-alive connection (Spin's
//! server does not set `TCP_NODELAY`). Queuing the body before the head is
//! handed over lets the server write both at once.

use spin_sdk::http::conversions::TryFromIncomingRequest;
use spin_sdk::http::{IncomingRequest, OutgoingBody, OutgoingResponse, Request, Response, ResponseOutparam};

/// Reads the whole request, lets `handle` answer it, and hands the answer
/// over (see [`send`]). A request whose body cannot be read gets a 400.
pub async fn serve(incoming: IncomingRequest, out: ResponseOutparam, handle: impl FnOnce(Request) -> Response) {
    let response = match Request::try_from_incoming_request(incoming).await {
        Ok(request) => handle(request),
        Err(error) => Response::builder()
            .status(400)
            .header("content-type", "text/plain")
            .body(format!("the request could not be read: {error}"))
            .build(),
    };
    send(out, response);
}

/// Hands `response` to the host with as much of its body as the host's
/// buffer takes already written (all of it, up to a megabyte, on Spin and
/// wasmtime's defaults); the rest, if any, follows once the head is out.
pub fn send(out: ResponseOutparam, mut response: Response) {
    let body = std::mem::take(response.body_mut());
    let outgoing = match OutgoingResponse::try_from(response) {
        Ok(outgoing) => outgoing,
        Err(error) => {
            // Only a header the host refuses gets here: say so rather than hang up.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("the response cannot be sent: {error}\n").as_bytes());
            let fallback = OutgoingResponse::new(spin_sdk::http::Headers::new());
            let _ = fallback.set_status_code(500);
            out.set(fallback);
            return;
        }
    };
    let Ok(outgoing_body) = outgoing.body() else {
        out.set(outgoing);
        return;
    };
    let Ok(stream) = outgoing_body.write() else {
        out.set(outgoing);
        return;
    };
    let mut rest: &[u8] = &body;
    while !rest.is_empty() {
        let allowed = usize::try_from(stream.check_write().unwrap_or(0)).unwrap_or(usize::MAX);
        if allowed == 0 {
            break;
        }
        let (now, later) = rest.split_at(allowed.min(rest.len()));
        if stream.write(now).is_err() {
            break;
        }
        rest = later;
    }
    if rest.is_empty() {
        drop(stream);
        let _ = OutgoingBody::finish(outgoing_body, None);
        out.set(outgoing);
        return;
    }
    // A body larger than the host's buffer: the head goes first, the rest streams.
    out.set(outgoing);
    for chunk in rest.chunks(4096) {
        if stream.blocking_write_and_flush(chunk).is_err() {
            return;
        }
    }
    drop(stream);
    let _ = OutgoingBody::finish(outgoing_body, None);
}
