//! Fair share for the app's public requests under `anypath up`: each request
//! is admitted per tenant, by the same mechanism that admits the sandbox's
//! executions, before its component runs. So a REST request planned by the
//! rules (which never reaches a sandbox) waits its turn like any other, and
//! a tenant flooding the app is held to its share while another tenant is
//! being served, and has all of it alone.

use std::sync::Arc;

use axum::http;

use anypath_service::admission::{Admission, AdmissionConfig, Refused};
use anypath_spin_host::app::OutBody;
use anypath_spin_host::gate::{Admitted, Decision, RequestGate};
use http_body_util::BodyExt;

/// The tenant of a request that presents an API key the app does not know:
/// its gateway refuses it, after it waited its turn in this bucket of its own.
const UNKNOWN_KEY: &str = "(unknown key)";

/// Admits the app's public requests per tenant.
pub struct TenantGate {
    admission: Arc<Admission>,
    /// The app's `key:tenant` pairs, so a request's tenant is the one its gateway binds it to.
    api_keys: Arc<Vec<(String, String)>>,
}

impl TenantGate {
    /// A gate with the defaults for this machine's cores.
    pub fn new(api_keys: Vec<(String, String)>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::with_config(AdmissionConfig::for_requests(cpus), api_keys)
    }

    /// A gate with its own bounds.
    pub fn with_config(config: AdmissionConfig, api_keys: Vec<(String, String)>) -> Self {
        Self { admission: Admission::new(config), api_keys: Arc::new(api_keys) }
    }

    /// The admission it keeps, which `/healthz` reports.
    pub fn admission(&self) -> Arc<Admission> {
        self.admission.clone()
    }

    /// The tenant the gateway binds `request` to: an API key's, else the
    /// `X-Session-Id`, else the default one.
    fn tenant(&self, request: &http::request::Parts) -> String {
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
        anypath_rest::caller::tenant(&self.api_keys, header("x-api-key"), header("x-session-id"))
            .unwrap_or_else(|_| UNKNOWN_KEY.to_owned())
    }
}

impl RequestGate for TenantGate {
    fn admit(&self, _component: &str, request: &http::request::Parts) -> Decision {
        let tenant = self.tenant(request);
        let given = request.headers.get(anypath_wire::request_id::HEADER).and_then(|v| v.to_str().ok());
        let request_id = anypath_wire::request_id::decide(given, || uuid::Uuid::new_v4().to_string());
        let admission = self.admission.clone();
        let (method, path) = (request.method.to_string(), request.uri.path().to_owned());
        Box::pin(async move {
            match admission.admit(&tenant).await {
                Ok(permit) => Ok(Box::new(permit) as Admitted),
                Err(refused) => {
                    // The request line the gateway would have written, had the
                    // request reached it: refused before any planning.
                    tracing::info!(%method, %path, status = refused_status(&refused).as_u16(), code = refused.code(), %tenant, %request_id, llm_calls = 0u64, "request refused before its component ran");
                    Err(refusal(&refused, &request_id))
                }
            }
        })
    }
}

/// The answer to a request that was not admitted, in the REST face's own
/// error shape: 429 past the tenant's share, 503 when everything is full.
fn refusal(refused: &Refused, request_id: &str) -> http::Response<OutBody> {
    let status = refused_status(refused);
    let envelope = anypath_rest::ErrorEnvelope::new(refused.code(), refused.to_string(), request_id);
    let body = serde_json::to_vec(&envelope).unwrap_or_default();
    let body = http_body_util::Full::new(axum::body::Bytes::from(body)).map_err(|never| match never {}).boxed_unsync();
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    if let Ok(value) = http::HeaderValue::from_str(request_id) {
        headers.insert(anypath_wire::request_id::HEADER, value);
    }
    response
}

/// 429 past the tenant's share, 503 when everything is full or stopping.
fn refused_status(refused: &Refused) -> http::StatusCode {
    match refused {
        Refused::TenantBusy { .. } => http::StatusCode::TOO_MANY_REQUESTS,
        Refused::Overloaded(_) | Refused::Closed => http::StatusCode::SERVICE_UNAVAILABLE,
    }
}
