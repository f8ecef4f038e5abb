//! What an E2B handler starts from, resolved before its body is read: the
//! caller of a control-plane call ([`ControlCall`], by its API key), or the
//! running sandbox a call names with the caller acting for its tenant
//! ([`SandboxCall`], admitted by the sandbox's access token; [`ContextCall`]
//! for the code contexts' calls, which E2B's SDKs make without it).

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;

use super::error::E2bError;
use super::registry::{Sandbox, SandboxState};
use super::{ACCESS_TOKEN, E2b, sandbox_header};
use crate::interpreter_service::Caller;
use crate::request_id::RequestId;

/// The caller of a control-plane call: its API key's tenant (401 without one).
pub(crate) struct ControlCall(pub Caller);

impl FromRequestParts<Arc<E2b>> for ControlCall {
    type Rejection = E2bError;

    async fn from_request_parts(parts: &mut Parts, e2b: &Arc<E2b>) -> Result<Self, E2bError> {
        let Ok(request_id) = RequestId::from_request_parts(parts, e2b).await;
        let caller = e2b.service.caller(&parts.headers, request_id.into_string());
        caller.map(Self).map_err(|_| E2bError::new(StatusCode::UNAUTHORIZED, "Invalid API key: send a key of this server in X-API-KEY"))
    }
}

/// The running sandbox a call names in `E2b-Sandbox-Id`, admitted by its
/// access token, and the caller acting for its tenant. Refused in E2B's
/// error shape, or, with `E` = [`super::error::ConnectError`], in Connect's.
pub(crate) struct SandboxCall<E = E2bError> {
    pub sandbox: Arc<Sandbox>,
    pub caller: Caller,
    refusal: PhantomData<fn() -> E>,
}

impl<E: From<E2bError> + IntoResponse> FromRequestParts<Arc<E2b>> for SandboxCall<E> {
    type Rejection = E;

    async fn from_request_parts(parts: &mut Parts, e2b: &Arc<E2b>) -> Result<Self, E> {
        let Ok(request_id) = RequestId::from_request_parts(parts, e2b).await;
        let (sandbox, caller) = e2b.sandbox_caller(&parts.headers, request_id).await?;
        Ok(Self { sandbox, caller, refusal: PhantomData })
    }
}

/// [`SandboxCall`] for the code contexts' calls, which E2B's SDKs make
/// without the access token.
pub(crate) struct ContextCall {
    pub sandbox: Arc<Sandbox>,
    pub caller: Caller,
}

impl FromRequestParts<Arc<E2b>> for ContextCall {
    type Rejection = E2bError;

    async fn from_request_parts(parts: &mut Parts, e2b: &Arc<E2b>) -> Result<Self, E2bError> {
        let Ok(request_id) = RequestId::from_request_parts(parts, e2b).await;
        let (sandbox, caller) = e2b.sandbox_caller_untokened(&parts.headers, request_id).await?;
        Ok(Self { sandbox, caller })
    }
}

impl E2b {
    /// The running sandbox a call names, admitted by its access token, and
    /// the caller acting for its tenant. A sandbox that is not running is
    /// 502, as E2B's proxy answers.
    pub(super) async fn sandbox_caller(&self, headers: &HeaderMap, request_id: RequestId) -> Result<(Arc<Sandbox>, Caller), E2bError> {
        let (sandbox, caller) = self.sandbox_caller_untokened(headers, request_id).await?;
        let presented = headers.get(ACCESS_TOKEN).and_then(|v| v.to_str().ok());
        if !sandbox.admits(presented) {
            return Err(E2bError::new(StatusCode::UNAUTHORIZED, "this sandbox needs its access token in X-Access-Token"));
        }
        Ok((sandbox, caller))
    }

    /// [`Self::sandbox_caller`] without the token.
    async fn sandbox_caller_untokened(&self, headers: &HeaderMap, request_id: RequestId) -> Result<(Arc<Sandbox>, Caller), E2bError> {
        let id = sandbox_header(headers).ok_or_else(|| E2bError::bad_request("name the sandbox in the E2b-Sandbox-Id header"))?;
        let sandbox = self.registry.get(id).await?.ok_or_else(|| E2bError::not_running(id))?;
        if sandbox.life().state != SandboxState::Running {
            return Err(E2bError::not_running(id));
        }
        let caller = self.service.tenant_caller(sandbox.tenant.clone(), headers, request_id.into_string());
        Ok((sandbox, caller))
    }
}
