//! A small blocking HTTP client on `wasi:http/outgoing-handler` with timeouts.
//!
//! Spin sets no request timeout for WASI 0.2 components, so every call the
//! gateway makes carries its own connect, first-byte and between-bytes limits.

use std::time::Duration;

use wasi::http::outgoing_handler;
pub use wasi::http::types::Method;
use wasi::http::types::{ErrorCode, Fields, OutgoingBody, OutgoingRequest, RequestOptions, Scheme};

/// An answer from an outbound call.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// The `Retry-After` header, when the answer has one (a refusal passed on keeps it).
    pub retry_after: Option<String>,
    /// The `Server-Timing` header: a component called by service chaining
    /// says where its own time went.
    pub server_timing: Option<String>,
    /// Every header, in order (an answer passed on keeps them all).
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Why an outbound call produced no answer.
#[derive(Debug)]
pub enum CallError {
    /// The URL could not be used.
    BadUrl(String),
    /// The host refused or the transport failed (including a denied host).
    Transport(String),
    /// A timeout fired.
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadUrl(m) => write!(f, "bad url: {m}"),
            Self::Transport(m) => write!(f, "{m}"),
            Self::Timeout => write!(f, "timed out"),
        }
    }
}

fn from_code(code: ErrorCode) -> CallError {
    match code {
        ErrorCode::ConnectionTimeout | ErrorCode::ConnectionReadTimeout | ErrorCode::ConnectionWriteTimeout => {
            CallError::Timeout
        }
        other => CallError::Transport(format!("{other:?}")),
    }
}

/// `POST url` with a body (or `GET` when `body` is `None`); the body is JSON
/// unless `headers` name another content type.
pub fn call(url: &str, body: Option<&[u8]>, headers: &[(&str, &str)], timeout: Duration) -> Result<Answer, CallError> {
    let method = if body.is_some() { Method::Post } else { Method::Get };
    call_with(method, url, body, headers, timeout)
}

/// The same with any method (`DELETE`, `PUT`, ...).
pub fn call_with(method: Method, url: &str, body: Option<&[u8]>, headers: &[(&str, &str)], timeout: Duration) -> Result<Answer, CallError> {
    send(method, url, body, headers, timeout, true)
}

/// Passes a request on as it came: its headers only, with no content type
/// assumed for a body that names none.
pub fn pass_on(method: Method, url: &str, body: Option<&[u8]>, headers: &[(&str, &str)], timeout: Duration) -> Result<Answer, CallError> {
    send(method, url, body, headers, timeout, false)
}

fn send(method: Method, url: &str, body: Option<&[u8]>, headers: &[(&str, &str)], timeout: Duration, json_by_default: bool) -> Result<Answer, CallError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| CallError::BadUrl(url.to_owned()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(&name.to_string(), &value.as_bytes().to_vec())
            .map_err(|e| CallError::BadUrl(format!("header {name}: {e:?}")))?;
    }
    if let Some(bytes) = body {
        // A declared length instead of chunked encoding: some servers (small
        // local model servers among them) cannot read a chunked request body.
        let _ = fields.append(&"content-length".to_string(), &bytes.len().to_string().into_bytes());
    }
    if json_by_default && body.is_some() && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
        let _ = fields.append(&"content-type".to_string(), &b"application/json".to_vec());
    }
    let request = OutgoingRequest::new(fields);
    let set = |ok: Result<(), ()>, what: &str| ok.map_err(|()| CallError::BadUrl(format!("{what} of {url}")));
    set(request.set_method(&method), "method")?;
    set(
        request.set_scheme(Some(&match scheme {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => Scheme::Other(other.to_owned()),
        })),
        "scheme",
    )?;
    set(request.set_authority(Some(authority)), "authority")?;
    set(request.set_path_with_query(Some(path)), "path")?;

    let outgoing_body = request.body().map_err(|()| CallError::Transport("request body unavailable".into()))?;
    let options = RequestOptions::new();
    let nanos = timeout.as_nanos() as u64;
    let _ = options.set_connect_timeout(Some(nanos));
    let _ = options.set_first_byte_timeout(Some(nanos));
    let _ = options.set_between_bytes_timeout(Some(nanos));
    let pending = outgoing_handler::handle(request, Some(options)).map_err(from_code)?;
    // A refused request (a host not allowed, say) closes the body stream; the
    // reason then arrives on the response future, so it is read before the
    // write error is reported.
    let written = write_body(&outgoing_body, body.unwrap_or_default())
        .and_then(|()| OutgoingBody::finish(outgoing_body, None).map_err(from_code));

    let deadline = wasi::clocks::monotonic_clock::subscribe_duration(nanos);
    let ready = pending.subscribe();
    let which = wasi::io::poll::poll(&[&ready, &deadline]);
    if !which.contains(&0) {
        return Err(CallError::Timeout);
    }
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(from_code(code)),
        Some(Err(())) | None => return Err(CallError::Transport("response unavailable".into())),
    };
    written?;
    let status = response.status();
    let header = |name: &str| response.headers().get(&name.to_string()).into_iter().next().and_then(|value| String::from_utf8(value).ok());
    let (retry_after, server_timing) = (header("retry-after"), header("server-timing"));
    let headers = response.headers().entries();
    // A HEAD answer has no body, though its length may say how long one would be.
    if matches!(method, Method::Head) {
        return Ok(Answer { status, body: Vec::new(), retry_after, server_timing, headers });
    }
    let incoming = response.consume().map_err(|()| CallError::Transport("response body unavailable".into()))?;
    let stream = incoming.stream().map_err(|()| CallError::Transport("response stream unavailable".into()))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(wasi::io::streams::StreamError::Closed) => break,
            Err(e) => return Err(CallError::Transport(format!("reading the response: {e:?}"))),
        }
    }
    Ok(Answer { status, body: bytes, retry_after, server_timing, headers })
}

fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), CallError> {
    let stream = body.write().map_err(|()| CallError::Transport("request stream unavailable".into()))?;
    for chunk in bytes.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| CallError::Transport(format!("writing the request: {e:?}")))?;
    }
    Ok(())
}
