//! Every request's id: one layer decides it by the rule every face follows
//! ([`anypath_wire::request_id`]: the caller's `x-request-id` when it is
//! usable, else a new UUID v4), hands it to handlers as the
//! [`RequestId`] extractor and to error answers through a task-local, and
//! names it in the answer's `x-request-id` header.

use std::convert::Infallible;
use std::fmt;

use anypath_wire::request_id;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// Header carrying the caller's request id (generated when absent or unusable).
pub(crate) const REQUEST_ID: &str = request_id::HEADER;

tokio::task_local! {
    /// The id of the request whose handler runs on this task: an error's
    /// `IntoResponse` has no request to read it from.
    static CURRENT: RequestId;
}

/// The id one request goes by in its answer, its error bodies and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestId(String);

impl RequestId {
    /// The id `headers` carry when it is short and printable, otherwise a new one.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let given = headers.get(REQUEST_ID).and_then(|v| v.to_str().ok());
        Self(request_id::decide(given, || Self::fresh().0))
    }

    /// A new id, for a request that brought none.
    pub fn fresh() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The id of the request being answered on this task; a new one outside
    /// any request (the stdio MCP server, a test building an answer alone).
    pub fn current() -> Self {
        CURRENT.try_with(Self::clone).unwrap_or_else(|_| Self::fresh())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as owned text (a caller's, an audit line's).
    pub fn into_string(self) -> String {
        self.0
    }

    /// The request's id: the one already decided for it, else the one its
    /// headers carry (or a new one), recorded in its extensions and its
    /// `x-request-id` header so that every later reader agrees.
    fn claim(headers: &mut HeaderMap, extensions: &mut Extensions) -> Self {
        if let Some(id) = extensions.get::<Self>() {
            return id.clone();
        }
        let id = Self::from_headers(headers);
        // A nested service reading the header (MCP's) sees the same one.
        if let Ok(value) = HeaderValue::from_str(id.as_str()) {
            headers.insert(REQUEST_ID, value);
        }
        extensions.insert(id.clone());
        id
    }

    /// Names this id in `response`'s `x-request-id` header.
    pub fn stamp(&self, response: &mut Response) {
        if let Ok(value) = HeaderValue::from_str(self.as_str()) {
            response.headers_mut().insert(REQUEST_ID, value);
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id the layer decided; on a route outside the layer, the one the
/// request's headers carry (or a new one, kept for the rest of the request).
impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Self::claim(&mut parts.headers, &mut parts.extensions))
    }
}

/// The layer: decides the request's id before anything else runs, keeps it
/// current while the request is handled, and names it in the answer.
pub(crate) async fn assign(request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let id = RequestId::claim(&mut parts.headers, &mut parts.extensions);
    let handled = next.run(Request::from_parts(parts, body));
    let mut response = CURRENT.scope(id.clone(), handled).await;
    id.stamp(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use anypath_wire::request_id::MAX_LEN;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn with_header(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_ID, HeaderValue::from_str(value).expect("a header value"));
        headers
    }

    #[test]
    fn a_short_printable_id_is_kept_and_any_other_replaced() {
        assert_eq!(RequestId::from_headers(&with_header("req-1.a_B")).as_str(), "req-1.a_B");
        for unusable in ["has space", "semi;colon", &"x".repeat(MAX_LEN + 1)] {
            let id = RequestId::from_headers(&with_header(unusable));
            assert_ne!(id.as_str(), unusable);
            assert!(uuid::Uuid::parse_str(id.as_str()).is_ok(), "{id}");
        }
        assert!(uuid::Uuid::parse_str(RequestId::from_headers(&HeaderMap::new()).as_str()).is_ok());
    }

    #[test]
    fn outside_any_request_the_current_id_is_a_new_one() {
        assert_ne!(RequestId::current(), RequestId::current());
    }

    async fn echo(id: RequestId) -> String {
        format!("{id} {}", RequestId::current())
    }

    async fn answer(request: axum::http::Request<Body>) -> Response {
        let app = Router::new().route("/", get(echo)).layer(axum::middleware::from_fn(assign));
        app.oneshot(request).await.expect("an answer")
    }

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 10).await.expect("a body");
        String::from_utf8(bytes.to_vec()).expect("text")
    }

    #[tokio::test]
    async fn the_layer_decides_one_id_for_the_handler_its_errors_and_the_answer() {
        let request = axum::http::Request::get("/").header(REQUEST_ID, "caller-7").body(Body::empty()).expect("a request");
        let response = answer(request).await;
        assert_eq!(response.headers()[REQUEST_ID], "caller-7");
        assert_eq!(text(response).await, "caller-7 caller-7");

        let response = answer(axum::http::Request::get("/").body(Body::empty()).expect("a request")).await;
        let header = response.headers()[REQUEST_ID].to_str().expect("text").to_owned();
        assert_eq!(text(response).await, format!("{header} {header}"));
    }

    #[tokio::test]
    async fn the_extractor_works_outside_the_layer() {
        let app = Router::new().route("/", get(|id: RequestId| async move { id.into_string() }));
        let request = axum::http::Request::get("/").header(REQUEST_ID, "outside-1").body(Body::empty()).expect("a request");
        let response = app.oneshot(request).await.expect("an answer");
        assert_eq!(text(response).await, "outside-1");
    }
}
