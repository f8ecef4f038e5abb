//! Who a call is for: the one caller type every transport resolves before
//! it asks the service for anything.

use anypath_interpreter::CallContext;

/// A resolved caller: the tenant its credentials map to, the id of the
/// request it made and the base of the absolute links its answers carry.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The tenant whose sessions and artifacts the call may touch.
    pub tenant: String,
    /// The request's id, named in error envelopes and the log.
    pub request_id: String,
    /// Base of the absolute links (`http://host:port`, or the public URL).
    pub base_url: String,
}

impl Caller {
    /// The same caller making another request (a transport with one caller
    /// for its whole life, such as stdio, resolves it once).
    pub fn next_request(&self) -> Self {
        Self { request_id: uuid::Uuid::new_v4().to_string(), ..self.clone() }
    }

    /// What an interpreter operation is told of the caller.
    pub fn context(&self) -> CallContext {
        CallContext { tenant: self.tenant.clone(), base_url: self.base_url.clone() }
    }
}
