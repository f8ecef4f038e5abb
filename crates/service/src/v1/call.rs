//! The caller of a `/v1` code-interpreter route, resolved once before any
//! body is read: every handler of the session and dataset APIs starts from it.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::interpreter_service::{Caller, InterpreterService, ServiceError};
use crate::request_id::RequestId;
use crate::state::AppState;

/// A call: the service and the caller it resolved from the request's key
/// or token.
pub(crate) struct Call {
    pub(crate) service: InterpreterService,
    pub(crate) caller: Caller,
}

/// Every handler starts from the call: the extractor answers 404 without an
/// interpreter and 401 without a valid key or token, before any body is read.
impl FromRequestParts<Arc<AppState>> for Call {
    type Rejection = ServiceError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, ServiceError> {
        let Ok(request_id) = RequestId::from_request_parts(parts, state).await;
        let service = InterpreterService::of(state)?;
        let caller = service.caller(&parts.headers, request_id.into_string())?;
        Ok(Call { service, caller })
    }
}
