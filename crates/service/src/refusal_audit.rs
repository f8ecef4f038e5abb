//! Every refusal leaves an audit line, including the ones given before a
//! request reaches the service facade (whose operations write their own):
//! a body that is not JSON or is cut short, a query that does not parse, a
//! body over its limit, an unknown route, a missing or wrong E2B or Jupyter
//! token. The layer here asks the audit trail whether the request's
//! handling wrote a line; an error answer without one gets a `refused` line, naming
//! the method and path (never the query, which may hold a link's
//! signature), the status and the error's code.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use crate::interpreter_service::audit;
use crate::request_id::RequestId;

/// The error code an answer carries in its body, for the refusal's line.
#[derive(Debug, Clone)]
pub(crate) struct RefusalCode(pub(crate) String);

/// The layer: an error answer whose handling wrote no audit line gets one.
pub(crate) async fn audit_refusals(id: RequestId, request: Request, next: Next) -> Response {
    let route = format!("{} {}", request.method(), request.uri().path());
    let (response, written) = audit::noting(next.run(request)).await;
    let status = response.status();
    if (status.is_client_error() || status.is_server_error()) && !written {
        let code = response.extensions().get::<RefusalCode>().map_or_else(|| status_code(status), |code| code.0.clone());
        audit::refused(id.as_str(), &route, status.as_u16(), &code);
    }
    response
}

/// A stable code for an answer that names none in a body the layer can
/// read (E2B's and Jupyter's error shapes): its status's reason, as a code.
fn status_code(status: StatusCode) -> String {
    status.canonical_reason().map_or_else(|| format!("status_{}", status.as_u16()), |reason| reason.to_ascii_lowercase().replace([' ', '-'], "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_without_a_code_is_named_by_its_reason() {
        assert_eq!(status_code(StatusCode::UNAUTHORIZED), "unauthorized");
        assert_eq!(status_code(StatusCode::PAYLOAD_TOO_LARGE), "payload_too_large");
        assert_eq!(status_code(StatusCode::from_u16(599).expect("a status")), "status_599");
    }
}
