//! `anypath sandbox serve`: the sandbox as an HTTP JSON API.
//!
//! `POST /v1/exec` runs one block; `GET /v1/admission` says whether one would
//! be admitted now; `GET /healthz` reports readiness and limits;
//! `GET /openapi.json` describes every route;
//! with a code interpreter, `/v1/sessions/...` serves it (`interpreter_api`)
//! and `/mcp` offers it as MCP tools (`mcp::http`).
//! Admission is fair across tenants (`admission`): each tenant runs and
//! queues at most its share, past which it is answered 429 with
//! `Retry-After`, while other tenants keep theirs; a full queue is 503.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::Interpreter;
use anypath_sandbox::{BlockRunner, ExecError, ExecRequest};
use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::admission::{Admission, AdmissionConfig, Permit, Refused};
use crate::credentials::Credentials;

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 32 << 20;
/// Header carrying the caller's request id (generated when absent or unusable).
pub(crate) const REQUEST_ID: &str = "x-request-id";

/// How the server listens and admits work.
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Shared secret expected as `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Execution slots and queue places, in all and per tenant.
    pub admission: AdmissionConfig,
    /// `key:tenant` pairs: an `X-API-Key` header selects the tenant of a
    /// code-interpreter call. Without any, every caller is tenant `default`.
    pub api_keys: Vec<(String, String)>,
    /// The code interpreter, when this service offers it.
    pub interpreter: Option<Arc<Interpreter>>,
    /// `Host` values `/mcp` answers (a DNS-rebinding guard); empty allows any.
    pub mcp_allowed_hosts: Vec<String>,
    /// A second bearer token, for the app's own components (`anypath up`
    /// makes one per process): its holder may name the tenant it acts for.
    pub trusted_token: Option<String>,
    /// Which web pages on other origins may call (none by default).
    pub cors: anypath_rest::cors::CorsPolicy,
    /// Where E2B's API listens ([`crate::e2b`]), when it is served.
    pub e2b_listen: Option<SocketAddr>,
    /// REST blocks (`/v1/exec`, `/v1/admission`) take any credential the
    /// other routes take, instead of `token` alone (`anypath up`, whose
    /// token and keys are the app's, so every listener asks for the same).
    pub exec_like_every_route: bool,
    /// Which environment variable names a run may set.
    pub run_env: crate::run_env::RunEnvPolicy,
}

/// What every route of the sandbox service shares: the block runner, the
/// interpreter facade, admission, credentials and metrics.
pub struct AppState {
    sandbox: BlockRunner,
    credentials: Credentials,
    pub(crate) interpreter: Option<Arc<Interpreter>>,
    pub(crate) admission: Arc<Admission>,
    /// What `/metrics` reports.
    pub(crate) metrics: crate::metrics::ServiceMetrics,
    /// Which environment variable names a run may set.
    pub(crate) run_env: crate::run_env::RunEnvPolicy,
    /// The address this service listens on: links fall back to it when a
    /// request names no `Host`.
    listen: SocketAddr,
}

/// How often expired sessions are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

impl AppState {
    /// The caller's tenant: the one its `X-API-Key` maps to; for a caller
    /// holding a token (the service's bearer token, or the app's trusted
    /// one) the tenant it names in `x-anypath-tenant` (the app's components
    /// act for the tenant they bound the request to), else `default`. Anyone
    /// else is `default` when neither keys nor a token are configured, and
    /// none (401) otherwise: without a token, naming a tenant counts for nothing.
    pub(crate) fn tenant(&self, headers: &HeaderMap) -> Option<String> {
        self.credentials.identify(headers).tenant()
    }

    /// The tenant of a caller presenting `token` as Jupyter's clients do
    /// ([`crate::credentials::Credentials::identify_token`]).
    pub(crate) fn tenant_of_token(&self, token: Option<&str>, headers: &HeaderMap) -> Option<String> {
        self.credentials.identify_token(token, headers).tenant()
    }

    /// The base of the absolute links an answer to this request carries.
    pub(crate) fn base_url(&self, interpreter: &Interpreter, headers: &HeaderMap) -> String {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned);
        interpreter.base_url(&host.unwrap_or_else(|| self.listen.to_string()))
    }

    /// The tenant a REST block runs for, by the same rule as [`Self::tenant`]
    /// (`default` when it names none). Used for fair admission and
    /// accounting, never for data.
    fn exec_tenant(&self, headers: &HeaderMap) -> String {
        self.tenant(headers).unwrap_or_else(|| "default".to_owned())
    }

    /// A slot for one execution of `tenant`, or the answer refusing it.
    pub(crate) async fn admit(&self, tenant: &str, request_id: &str) -> Result<Permit, Response> {
        self.admission.admit(tenant).await.map_err(|refused| {
            self.metrics.record_refusal(tenant, refused.code());
            refusal(refused, request_id)
        })
    }

    /// Counts an execution that ended on a limit against its tenant.
    pub(crate) fn account(&self, tenant: &str, error: Option<&ExecError>) {
        if error.is_some_and(ExecError::is_limit) {
            self.admission.record_limit_breach(tenant);
        }
    }
}

/// The answer to a refused admission: 429 for a tenant past its share, 503
/// when the service is full or stopping; both ask for a retry in a second
/// (a slot frees as soon as any execution ends).
pub(crate) fn refusal(refused: Refused, request_id: &str) -> Response {
    let status = match refused {
        Refused::TenantBusy { .. } => StatusCode::TOO_MANY_REQUESTS,
        Refused::Overloaded(_) | Refused::Closed => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = error(status, refused.code(), &refused.to_string(), request_id);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Serves until Ctrl-C or SIGTERM: the sandbox's API, and E2B's on its
/// own listener when one is asked for.
pub async fn serve(sandbox: BlockRunner, mut options: ServeOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    options.listen = listener.local_addr()?;
    let routers = routers(sandbox, &options);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let e2b_task = match (options.e2b_listen, routers.e2b) {
        (Some(address), Some(e2b)) => {
            let e2b_listener = tokio::net::TcpListener::bind(address).await.map_err(|e| anyhow::anyhow!("binding the E2B listener {address}: {e}"))?;
            tracing::info!(listen = %e2b_listener.local_addr()?, "E2B API serving");
            Some(tokio::spawn(serve_router(e2b_listener, e2b, stopped_signal(stopped.clone()))))
        }
        _ => None,
    };
    let served = serve_on(listener, routers.sandbox, async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    })
    .await;
    if let Some(task) = e2b_task {
        let _ = task.await;
    }
    if let Some(interpreter) = &options.interpreter {
        hibernate_all(interpreter).await;
    }
    served
}

/// Resolves once `stopped` says so.
pub async fn stopped_signal(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// On a graceful stop: every live session's state goes to disk, for the
/// next process to resume.
pub async fn hibernate_all(interpreter: &Arc<Interpreter>) {
    let started = std::time::Instant::now();
    let hibernated = interpreter.hibernate_all().await;
    tracing::info!(hibernated, elapsed_ms = started.elapsed().as_millis() as u64, "sessions hibernated for the stop");
}

/// Serves `app` (a [`router`]) on an already bound listener until `shutdown` resolves.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    tracing::info!(listen = %listener.local_addr()?, "sandbox serving");
    serve_router(listener, app, shutdown).await
}

/// [`serve_on`] without its log line, for the service's other listeners
/// (each announces itself in its own words).
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use axum::serve::ListenerExt;
    // A websocket answer is several small frames in a row (a kernel's
    // status, output, reply, status): with Nagle's algorithm each waits for
    // the client's delayed ACK of the one before, 40 ms a time.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set");
        }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

impl AppState {
    /// The state every route (and the stdio MCP server) shares: credentials,
    /// the interpreter and the admission limits.
    pub fn new(sandbox: BlockRunner, options: &ServeOptions) -> Arc<Self> {
        let admission = Admission::new(options.admission);
        Arc::new(AppState {
            sandbox,
            credentials: Credentials::new(
                options.token.as_deref(),
                options.trusted_token.as_deref(),
                &options.api_keys,
                options.exec_like_every_route,
            ),
            run_env: options.run_env.clone(),
            interpreter: options.interpreter.clone(),
            metrics: crate::metrics::ServiceMetrics::new(options.interpreter.as_ref(), &admission),
            admission,
            listen: options.listen,
        })
    }
}

/// The sandbox's HTTP API (`/v1/exec`, `/healthz`, the code interpreter and
/// `/mcp`) with its admission limits.
pub fn router(sandbox: BlockRunner, options: &ServeOptions) -> Router {
    routers(sandbox, options).sandbox
}

/// The routers of one service: they share its state (admission, sessions).
pub struct Routers {
    /// The sandbox's own API ([`router`]).
    pub sandbox: Router,
    /// E2B's API ([`crate::e2b`]), when the service runs a code interpreter.
    pub e2b: Option<Router>,
}

/// The sandbox's API and E2B's, over one state.
pub fn routers(sandbox: BlockRunner, options: &ServeOptions) -> Routers {
    let state = AppState::new(sandbox, options);
    if let Some(interpreter) = &options.interpreter {
        spawn_sweeper(Arc::downgrade(interpreter));
    }
    let e2b = crate::e2b::router(&state);
    let router = Router::new()
        .route("/v1/exec", post(exec))
        .route("/v1/admission", get(admission_probe))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .merge(crate::interpreter_api::routes(&state))
        .merge(crate::mcp::http::routes(&state, &options.mcp_allowed_hosts))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(crate::envelope::every_error_an_envelope))
        .with_state(state.clone());
    // Jupyter's routes answer in Jupyter's error shape, outside the envelope layer.
    let router = match crate::jupyter::router(&state) {
        Some(jupyter) => router.merge(jupyter),
        None => router,
    };
    let sandbox = match cors_layer(&options.cors) {
        // Outermost: errors and refusals carry the headers too.
        Some(layer) => router.layer(layer),
        None => router,
    };
    Routers { sandbox, e2b }
}

/// The policy as tower-http's layer: the same origins, request and exposed
/// headers and preflight lifetime as the gateway's; None when it allows no origin.
fn cors_layer(policy: &anypath_rest::cors::CorsPolicy) -> Option<tower_http::cors::CorsLayer> {
    use anypath_rest::cors::{ALLOWED_HEADERS, EXPOSED_HEADERS, MAX_AGE_SECONDS};
    use axum::http::{HeaderName, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if !policy.is_enabled() {
        return None;
    }
    let origins = match policy.listed_origins() {
        None => AllowOrigin::any(),
        Some(list) => AllowOrigin::list(list.iter().filter_map(|origin| HeaderValue::from_str(origin).ok())),
    };
    let names = |names: &[&str]| names.iter().filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok()).collect::<Vec<_>>();
    // MCP's Streamable HTTP reads these two besides the app's own.
    let mut allowed = names(ALLOWED_HEADERS);
    allowed.extend(names(&["mcp-session-id", "mcp-protocol-version", "accept"]));
    let mut exposed = names(EXPOSED_HEADERS);
    exposed.extend(names(&["mcp-session-id", "content-disposition"]));
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS])
            .allow_headers(allowed)
            .expose_headers(exposed)
            .max_age(Duration::from_secs(u64::from(MAX_AGE_SECONDS)))
            .allow_credentials(policy.allows_credentials()),
    )
}

/// Hibernates idle sessions (checked every half of their idle time, between
/// 1 and 30 s) and removes expired ones every [`SWEEP_EVERY`], until the
/// interpreter is gone.
pub fn spawn_sweeper(interpreter: std::sync::Weak<Interpreter>) {
    tokio::spawn(async move {
        let every = match interpreter.upgrade() {
            Some(i) => (i.config().hibernate_after_idle / 2).clamp(Duration::from_secs(1), SWEEP_EVERY),
            None => return,
        };
        let mut tick = tokio::time::interval(every);
        let mut swept = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let Some(interpreter) = interpreter.upgrade() else { return };
            let hibernated = interpreter.hibernate_idle().await;
            if hibernated > 0 {
                tracing::info!(hibernated, "idle sessions hibernated");
            }
            if swept.elapsed() < SWEEP_EVERY {
                continue;
            }
            swept = tokio::time::Instant::now();
            let removed = tokio::task::spawn_blocking(move || interpreter.sweep()).await.unwrap_or(0);
            if removed > 0 {
                tracing::info!(removed, "expired sessions removed");
            }
        }
    });
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn exec(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let request_id = request_id(request.headers());
    if !authorised(&state, request.headers()) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token", &request_id);
    }
    let tenant = state.exec_tenant(request.headers());
    let body = match to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            let message = format!("request body exceeds {MAX_BODY_BYTES} bytes");
            return error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", &message, &request_id);
        }
    };
    let exec_request: ExecRequest = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_json", &e.to_string(), &request_id),
    };
    drop(body);

    let permit = match state.admit(&tenant, &request_id).await {
        Ok(permit) => permit,
        Err(refused) => {
            tracing::info!(request_id = %request_id, tenant, outcome = "refused", "exec");
            return refused;
        }
    };
    let report = state.sandbox.execute(exec_request).await;
    drop(permit);
    let failed = report.outcome.as_ref().err().map(|failure| &failure.error);
    state.account(&tenant, failed);
    state.metrics.record_run(crate::metrics::Kind::Block, failed, false, report.metrics.duration_us);
    // One line per execution: never the code, context or data.
    tracing::info!(
        request_id = %request_id,
        tenant,
        outcome = report.outcome_name(),
        duration_us = report.metrics.duration_us,
        fuel = report.metrics.fuel_consumed,
        peak_memory_bytes = report.metrics.peak_memory_bytes,
        warm = report.metrics.warm,
        "exec"
    );
    let mut response = match serde_json::to_vec(&report) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", &e.to_string(), &request_id),
    };
    set_request_id(&mut response, &request_id);
    response
}

/// Whether an execution for the caller's tenant would be admitted now: 204,
/// or the refusal `/v1/exec` would give (429 or 503, with `Retry-After`).
/// The gateway asks before it plans, so a tenant past its share is turned
/// away before any planning or loading is spent on its request.
async fn admission_probe(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let request_id = request_id(&headers);
    if !authorised(&state, &headers) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token", &request_id);
    }
    let tenant = state.exec_tenant(&headers);
    match state.admission.probe(&tenant) {
        Ok(()) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            set_request_id(&mut response, &request_id);
            response
        }
        Err(refused) => {
            tracing::info!(request_id = %request_id, tenant, outcome = "refused", "admission probe");
            refusal(refused, &request_id)
        }
    }
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let (running, queued, tenants) = state.admission.snapshot();
    let config = state.admission.config();
    let body = json!({
        "status": "ok",
        "limits": state.sandbox.limits(),
        "running": running,
        "queued": queued,
        "admission": {
            "max_running": config.max_running,
            "tenant_running": config.tenant_running,
            "max_queued": config.max_queued,
            "tenant_queued": config.tenant_queued,
        },
        "tenants": tenants,
        "runtimes": runtimes(&state),
    });
    axum::Json(body).into_response()
}

/// The Prometheus text exposition, behind the same credentials as the
/// service's other calls.
async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let request_id = request_id(&headers);
    if state.tenant(&headers).is_none() {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "metrics need the service's token or an API key", &request_id);
    }
    match state.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response(),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the metrics could not be written", &request_id),
    }
}

/// Readiness: 200 when the runtimes are compiled and loaded (the REST
/// runtime answered its start, the session runtimes are there), the data
/// directory takes a file and the artifact index and blob store work; 503
/// with the failing check otherwise.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    // The block runner is compiled and loaded before the service listens.
    let rest = anypath_wire::ReadinessCheck::of("rest_runtime", Ok(()), Some("python".to_owned()));
    let interpreter = state.interpreter.clone();
    let checks = tokio::task::spawn_blocking(move || {
        let mut checks = vec![rest];
        if let Some(interpreter) = interpreter {
            checks.extend(interpreter.readiness());
        }
        checks
    })
    .await
    .unwrap_or_else(|e| vec![anypath_wire::ReadinessCheck::of("checks", Err(format!("the checks did not finish: {e}")), None)]);
    let readiness = anypath_wire::Readiness::of(checks);
    let status = if readiness.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(readiness)).into_response()
}

/// What each runtime is: the REST runtime, and those sessions may ask for
/// (with their origin and limits), the default one marked.
fn runtimes(state: &AppState) -> serde_json::Value {
    let Some(interpreter) = &state.interpreter else {
        return json!([state.sandbox.describe()]);
    };
    let described = interpreter.sandboxes().iter().map(|sandbox| {
        let mut about = sandbox.describe();
        about["default_for_sessions"] = json!(sandbox.runtime() == interpreter.default_runtime());
        about
    });
    serde_json::Value::Array(described.collect())
}

/// The service's OpenAPI document: every route, its auth and error envelope.
const OPENAPI: &str = include_str!("openapi/sandbox.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn not_found(headers: HeaderMap) -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "no such endpoint", &request_id(&headers))
}

fn authorised(state: &AppState, headers: &HeaderMap) -> bool {
    state.credentials.may_execute(headers)
}

/// The caller's id when it is short and printable, otherwise a new one.
pub(crate) fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

pub(crate) fn set_request_id(response: &mut Response, request_id: &str) {
    if let Ok(value) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
}

/// The JSON error envelope: `{"error": {"code", "message", "request_id"}}`.
pub(crate) fn error(status: StatusCode, code: &str, message: &str, request_id: &str) -> Response {
    let body = json!({ "error": { "code": code, "message": message, "request_id": request_id } });
    let mut response = (status, axum::Json(body)).into_response();
    set_request_id(&mut response, request_id);
    response
}

