//! What a public request passes before it is served: its id, the caller's
//! credentials and tenant, its size, its context, and whether the rules
//! serve it in the store.

use anypath_rest::context::RawRequest;
use anypath_rest::surface::{self, Planning, Shape};
use anypath_rest::{RequestContext, RestError, caller, names, rules};
use spin_sdk::http::Request;

use crate::settings::FrontSettings;

/// The header on a request the store hands to the gateway: the client's
/// address, which the hand-over by service chaining would otherwise lose.
/// The store drops any such header a client sends.
pub const CLIENT_ADDR_HEADER: &str = "x-anypath-client-addr";

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.header(name).and_then(|v| v.as_str())
}

/// The caller's `x-request-id` when usable, otherwise 128 random bits.
pub fn request_id(request: &Request) -> String {
    anypath_wire::request_id::decide(header(request, anypath_wire::request_id::HEADER), || {
        let (a, b) = (wasi::random::random::get_random_u64(), wasi::random::random::get_random_u64());
        format!("{a:016x}{b:016x}")
    })
}

/// Whether the request came from another component of the app by service
/// chaining: the host gives such a request a client address with port 0
/// (`0.0.0.0:0` under Spin), which no TCP client can have.
pub fn chained(request: &Request) -> bool {
    header(request, "spin-client-addr").and_then(|addr| addr.rsplit_once(':')).is_some_and(|(_, port)| port == "0")
}

/// The client's address (`ip:port`): the host's, or for a request the
/// store handed over, the one the store passed on.
pub fn client_addr(request: &Request) -> String {
    let own = header(request, "spin-client-addr").unwrap_or("");
    if chained(request) { header(request, CLIENT_ADDR_HEADER).unwrap_or(own).to_owned() } else { own.to_owned() }
}

/// Authenticates the caller, binds the request to its tenant, and builds
/// its context: `(context, tenant)`, or the refusal.
pub fn context(request: &Request, settings: &FrontSettings) -> Result<(RequestContext, String), RestError> {
    caller::authorise(&settings.auth_token, header(request, "authorization"))?;
    let tenant = caller::tenant(&settings.api_keys, header(request, "x-api-key"), header(request, "x-session-id"))?;
    if request.body().len() > settings.max_body_bytes {
        return Err(RestError::BodyTooLarge { limit: settings.max_body_bytes });
    }
    let headers: Vec<(String, String)> = request
        .headers()
        .filter_map(|(name, value)| value.as_str().map(|v| (name.to_owned(), v.to_owned())))
        .collect();
    let addr = client_addr(request);
    let client_ip = addr.rsplit_once(':').map(|(ip, _)| ip).unwrap_or_default();
    let raw = RawRequest {
        method: &request.method().to_string(),
        path: request.path(),
        query: request.query(),
        headers: &headers,
        body: request.body(),
        client_ip,
    };
    let ctx = RequestContext::build(&raw, &tenant)?;
    Ok((ctx, tenant))
}

/// The last checks, once the method is known to be served: a body's `id`
/// must be usable, and under `delete_reply = "record"` every DELETE asks
/// for the deleted record (what react-admin's deleteMany reads).
pub fn finish(ctx: &mut RequestContext, settings: &FrontSettings) -> Result<(), RestError> {
    names::body_id(ctx.body_json.as_mut())?;
    if settings.delete_returns_record && ctx.method == "DELETE" {
        ctx.headers.entry("prefer".into()).or_insert_with(|| "return=representation".into());
    }
    Ok(())
}

/// Whether the rules accept the request's method on its path as it is,
/// with no planner asked (`OPTIONS` is answered by the gateway).
pub fn rules_accept(ctx: &RequestContext) -> bool {
    let usable_collection = ctx.segments.first().is_some_and(|collection| names::collection(collection).is_ok());
    usable_collection
        && ctx.method != "OPTIONS"
        && surface::allowed(Shape::of(&ctx.path, &ctx.segments), Planning::Rules).contains(&ctx.method.as_str())
}

/// Whether the request is planned by the rules without asking the planner
/// and run in the store: what the planner would decide, read from the same
/// `planner_mode` (every mode but `llm` plans a conventional request by the
/// rules; `rules` plans all it can).
pub fn runs_in_store(ctx: &RequestContext, settings: &FrontSettings) -> bool {
    settings.rules_direct
        && match settings.planner_mode.as_str() {
            "rules" => rules::plan(ctx).is_ok(),
            "" | "auto" => rules::conventional(ctx),
            _ => false,
        }
}
