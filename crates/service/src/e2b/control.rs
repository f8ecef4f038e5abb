//! E2B's control plane (`spec/openapi.yml` of e2b-dev/E2B): create, list,
//! describe, time out, pause, connect (resume), fork and kill sandboxes.
//! A sandbox is one interpreter session; pausing hibernates it, connecting
//! lets its next run resume the saved state, forking forks the session.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anypath_interpreter::{InterpreterError, files, hibernation, sessions, snapshots};
use anypath_sandbox::Runtime;
use axum::body::Bytes;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::E2b;
use super::call::ControlCall;
use super::error::E2bError;
use super::registry::{self, Lifecycle, Part, Sandbox, SandboxState};
use crate::interpreter_service::{Caller, ServiceError};

/// The templates this server offers: each gives the data runtime (pandas,
/// numpy, matplotlib) when the server has it.
pub(crate) const TEMPLATES: &[&str] = &["code-interpreter-v1", "base"];

/// The envd version reported, whose every feature the SDKs gate on is
/// served: watches that allow network mounts (0.6.4, every folder here is
/// local), watch events with their entry (0.6.3), file metadata (0.6.2),
/// octet-stream and gzip uploads (0.5.7), the default user (0.4.0),
/// recursive watches (0.1.4).
pub(crate) const ENVD_VERSION: &str = "0.6.4";

/// E2B's default sandbox timeout, in seconds.
const DEFAULT_TIMEOUT_SECONDS: u64 = 300;

/// `POST /sandboxes` and `POST /v2/sandboxes`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSandbox {
    #[serde(rename = "templateID")]
    template_id: String,
    timeout: Option<u64>,
    auto_pause: Option<bool>,
    /// Whether the timeout's pause keeps the Python state (the default).
    auto_pause_memory: Option<bool>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    env_vars: Option<BTreeMap<String, String>>,
    /// The first API's opt-in to access tokens; the second always has them.
    secure: Option<bool>,
}

/// `/pause`'s body: `memory: false` keeps only the files (E2B's
/// filesystem-only snapshot: the sandbox boots afresh when resumed).
#[derive(Debug, Default, Deserialize)]
struct PauseBody {
    memory: Option<bool>,
}

/// A timeout, as `/timeout`, `/connect`, `/resume` and `/fork` take it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimeoutBody {
    timeout: Option<u64>,
    count: Option<u32>,
}

/// `Sandbox` of E2B's API: what create, connect and fork answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SandboxJson {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
    alias: String,
    #[serde(rename = "clientID")]
    client_id: String,
    envd_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    envd_access_token: Option<String>,
    domain: Option<String>,
}

/// `SandboxDetail` and `ListedSandbox` of E2B's API.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SandboxDetail {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
    alias: String,
    #[serde(rename = "clientID")]
    client_id: String,
    started_at: String,
    end_at: String,
    envd_version: &'static str,
    cpu_count: u32,
    #[serde(rename = "memoryMB")]
    memory_mb: u64,
    #[serde(rename = "diskSizeMB")]
    disk_size_mb: u64,
    state: SandboxState,
    metadata: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    envd_access_token: Option<String>,
}

/// One result of `/fork`.
#[derive(Debug, Serialize)]
struct ForkResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<SandboxJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ForkError>,
}

#[derive(Debug, Serialize)]
struct ForkError {
    code: u16,
    message: String,
}

/// RFC 3339 in UTC, as E2B writes times.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl E2b {
    fn sandbox_json(&self, sandbox: &Sandbox) -> SandboxJson {
        SandboxJson {
            template_id: sandbox.template.clone(),
            sandbox_id: sandbox.id.clone(),
            alias: sandbox.template.clone(),
            client_id: sandbox.client_id.clone(),
            envd_version: ENVD_VERSION,
            envd_access_token: sandbox.access_token.clone(),
            domain: None,
        }
    }

    fn detail(&self, sandbox: &Sandbox) -> SandboxDetail {
        let life = sandbox.life();
        let limits = self.service.limits();
        let memory = limits.runtimes.iter().map(|(_, l)| l.memory_bytes).max().unwrap_or(0);
        SandboxDetail {
            template_id: sandbox.template.clone(),
            sandbox_id: sandbox.id.clone(),
            alias: sandbox.template.clone(),
            client_id: sandbox.client_id.clone(),
            started_at: rfc3339(sandbox.started_at),
            end_at: rfc3339(life.end_at),
            envd_version: ENVD_VERSION,
            cpu_count: 1,
            memory_mb: memory >> 20,
            disk_size_mb: limits.quota.max_session_bytes >> 20,
            state: life.state,
            metadata: sandbox.metadata.clone(),
            envd_access_token: sandbox.access_token.clone(),
        }
    }

    /// The caller's sandbox `id` (another tenant's is not found).
    pub(crate) async fn owned(&self, caller: &Caller, id: &str) -> Result<Arc<Sandbox>, E2bError> {
        self.registry.owned(&caller.tenant, id).await?.ok_or_else(|| E2bError::not_found(format!("sandbox \"{id}\" doesn't exist or you don't have access to it")))
    }

    /// The longest timeout a sandbox may have: its session's idle limit.
    fn clamp_timeout(&self, seconds: Option<u64>) -> u64 {
        let most = self.service.limits().session_ttl.as_secs().max(self.max_ttl.as_secs());
        seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS).clamp(1, most.max(1))
    }

    /// The runtime a template gives.
    fn runtime(&self) -> Runtime {
        if self.service.limits().runtimes.iter().any(|(runtime, _)| *runtime == Runtime::PythonData) { Runtime::PythonData } else { Runtime::Python }
    }

    /// Ends a sandbox: its contexts' sessions and its own are closed.
    pub(crate) async fn kill(&self, caller: &Caller, sandbox: &Sandbox) -> Result<(), E2bError> {
        self.registry.remove(&sandbox.id).await?;
        self.runs.interrupt_sandbox(&sandbox.id);
        self.watchers.forget_sandbox(&sandbox.id);
        self.commands.stop_session(&caller.tenant, &sandbox.id);
        let sessions = sandbox.sessions();
        // Runs started over any transport stop first: closing waits for them.
        for session in &sessions {
            self.interrupt_run(caller, session);
        }
        for session in sessions {
            let _ = self.service.call(caller, sessions::CloseSession { session_id: session }).await;
        }
        tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, sandbox = %sandbox.id, "e2b sandbox killed");
        Ok(())
    }

    /// Boots the sandbox's tree afresh: a new kernel boot id, which the
    /// code and envd's file calls read where Linux keeps it (the first was
    /// written when the tree was laid out).
    async fn reboot(&self, caller: &Caller, session_id: &str) -> Result<(), E2bError> {
        let boot_id = anypath_sandbox::layout::new_boot_id();
        let path = super::paths::to_session(anypath_sandbox::layout::BOOT_ID, None)?;
        let write = files::WritePath { session_id: session_id.to_owned(), path, bytes: boot_id.into(), metadata: BTreeMap::new() };
        self.service.call(caller, write).await.map_err(E2bError::from)?;
        Ok(())
    }

    /// Pauses a running sandbox: every context's live state is hibernated,
    /// or, without `keep_memory`, dropped: the files stay, and the sandbox
    /// is booted afresh (a new boot id) for its resume.
    async fn pause(&self, caller: &Caller, sandbox: &Sandbox, keep_memory: bool) -> Result<(), E2bError> {
        {
            let mut life = sandbox.life();
            if life.state == SandboxState::Paused {
                return Err(E2bError::new(StatusCode::CONFLICT, format!("sandbox \"{}\" is already paused", sandbox.id)));
            }
            life.state = SandboxState::Paused;
        }
        if let Err(error) = self.registry.changed(sandbox, &[Part::State]).await {
            sandbox.life().state = SandboxState::Running;
            return Err(error.into());
        }
        self.runs.interrupt_sandbox(&sandbox.id);
        let sessions = sandbox.sessions();
        for session in &sessions {
            self.interrupt_run(caller, session);
        }
        for session in sessions {
            match keep_memory {
                true => drop(self.service.call(caller, hibernation::HibernateSession { session_id: session }).await.map_err(E2bError::from)?),
                false => self.service.call(caller, sessions::RestartSession { session_id: session }).await.map_err(E2bError::from)?,
            }
        }
        if !keep_memory {
            self.reboot(caller, &sandbox.id).await?;
        }
        tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, sandbox = %sandbox.id, keep_memory, "e2b sandbox paused");
        Ok(())
    }

    /// Creates a sandbox of `template` for `caller`.
    async fn create(&self, caller: &Caller, new: NewSandbox, secure: bool) -> Result<Arc<Sandbox>, E2bError> {
        let id = registry::new_sandbox_id();
        if TEMPLATES.contains(&new.template_id.as_str()) {
            // Laid out as a sandbox: its files are the code's whole tree, its home /home/user.
            let open = anypath_interpreter::sandbox_open::OpenSandbox { session_id: id.clone(), ttl: Some(self.max_ttl), runtime: self.runtime() };
            self.service.call(caller, open).await.map_err(E2bError::from)?;
        } else {
            // Any other template is one of the caller's snapshots, by id or name.
            let start = snapshots::StartFromSnapshot { session_id: id.clone(), snapshot: new.template_id.clone(), ttl: Some(self.max_ttl), runtime: None };
            self.service.call(caller, start).await.map_err(|error| match error {
                ServiceError::Interpreter(InterpreterError::NoSuchSnapshot(_)) => E2bError::not_found(format!(
                    "template '{}' not found: this server offers {} (Python with pandas, numpy and matplotlib) and your snapshots",
                    new.template_id,
                    TEMPLATES.join(" and ")
                )),
                other => E2bError::from(other),
            })?;
        }
        let now = SystemTime::now();
        let timeout = self.clamp_timeout(new.timeout);
        let sandbox = Sandbox {
            id,
            tenant: caller.tenant.clone(),
            template: new.template_id,
            client_id: self.client_id.clone(),
            access_token: secure.then(registry::new_access_token),
            metadata: new.metadata.unwrap_or_default(),
            env_vars: new.env_vars.unwrap_or_default(),
            started_at: now,
            auto_pause: new.auto_pause.unwrap_or(false),
            auto_pause_memory: new.auto_pause_memory.unwrap_or(true),
            life: std::sync::Mutex::new(Lifecycle { state: SandboxState::Running, end_at: registry::after(now, timeout), contexts: Vec::new(), executions: 0 }),
        };
        let sandbox = self.registry.insert(sandbox).await?;
        tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, sandbox = %sandbox.id, template = %sandbox.template, "e2b sandbox created");
        Ok(sandbox)
    }

    /// A fork of `parent`: a new sandbox over a copy of its files and state.
    async fn fork_one(&self, caller: &Caller, parent: &Sandbox, timeout: Option<u64>) -> Result<Arc<Sandbox>, E2bError> {
        let id = registry::new_sandbox_id();
        self.service.call(caller, sessions::ForkSession { session_id: parent.id.clone(), new_session_id: id.clone() }).await.map_err(E2bError::from)?;
        let now = SystemTime::now();
        let sandbox = Sandbox {
            id,
            tenant: caller.tenant.clone(),
            template: parent.template.clone(),
            client_id: self.client_id.clone(),
            access_token: parent.access_token.as_ref().map(|_| registry::new_access_token()),
            metadata: parent.metadata.clone(),
            env_vars: parent.env_vars.clone(),
            started_at: now,
            auto_pause: parent.auto_pause,
            auto_pause_memory: parent.auto_pause_memory,
            life: std::sync::Mutex::new(Lifecycle {
                state: SandboxState::Running,
                end_at: registry::after(now, self.clamp_timeout(timeout)),
                contexts: Vec::new(),
                executions: parent.life().executions,
            }),
        };
        Ok(self.registry.insert(sandbox).await?)
    }
}

/// Parses a JSON body (an empty one is the default).
pub(crate) fn body<T: serde::de::DeserializeOwned + Default>(bytes: &Bytes) -> Result<T, E2bError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| E2bError::bad_request(format!("the request body is not the JSON this call takes: {e}")))
}

pub(crate) async fn create_v1(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, bytes: Bytes) -> Result<impl IntoResponse, E2bError> {
    create(&e2b, &caller, &bytes, false).await
}

pub(crate) async fn create_v2(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, bytes: Bytes) -> Result<impl IntoResponse, E2bError> {
    create(&e2b, &caller, &bytes, true).await
}

/// The second API always secures envd; the first does when asked.
async fn create(e2b: &E2b, caller: &Caller, bytes: &Bytes, always_secure: bool) -> Result<(StatusCode, Json<SandboxJson>), E2bError> {
    let new: NewSandbox = serde_json::from_slice(bytes).map_err(|e| E2bError::bad_request(format!("the request body is not a new sandbox: {e}")))?;
    let secure = always_secure || new.secure.unwrap_or(false);
    let sandbox = e2b.create(caller, new, secure).await?;
    Ok((StatusCode::CREATED, Json(e2b.sandbox_json(&sandbox))))
}

pub(crate) async fn describe(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, Path(id): Path<String>) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    Ok(Json(e2b.detail(&sandbox)))
}

pub(crate) async fn kill(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, Path(id): Path<String>) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    e2b.kill(&caller, &sandbox).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn set_timeout(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let asked: TimeoutBody = body(&bytes)?;
    let timeout = e2b.clamp_timeout(Some(asked.timeout.ok_or_else(|| E2bError::bad_request("timeout (seconds) is required"))?));
    sandbox.life().end_at = registry::after(SystemTime::now(), timeout);
    e2b.registry.changed(&sandbox, &[Part::EndAt]).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn pause(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let asked: PauseBody = body(&bytes)?;
    e2b.pause(&caller, &sandbox, asked.memory.unwrap_or(true)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `/connect`: a paused sandbox is resumed (201), a running one has its
/// timeout extended, never shortened (200).
pub(crate) async fn connect(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let asked: TimeoutBody = body(&bytes)?;
    let end = registry::after(SystemTime::now(), e2b.clamp_timeout(asked.timeout));
    let resumed = {
        let mut life = sandbox.life();
        let resumed = life.state == SandboxState::Paused;
        life.state = SandboxState::Running;
        life.end_at = if resumed { end } else { life.end_at.max(end) };
        resumed
    };
    e2b.registry.changed(&sandbox, &[Part::State, Part::EndAt]).await?;
    Ok((if resumed { StatusCode::CREATED } else { StatusCode::OK }, Json(e2b.sandbox_json(&sandbox))))
}

/// The first API's `/resume`: only a paused sandbox (409 otherwise).
pub(crate) async fn resume(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let asked: TimeoutBody = body(&bytes)?;
    {
        let mut life = sandbox.life();
        if life.state == SandboxState::Running {
            return Err(E2bError::new(StatusCode::CONFLICT, format!("sandbox \"{id}\" is already running")));
        }
        life.state = SandboxState::Running;
        life.end_at = registry::after(SystemTime::now(), e2b.clamp_timeout(asked.timeout));
    }
    e2b.registry.changed(&sandbox, &[Part::State, Part::EndAt]).await?;
    Ok((StatusCode::CREATED, Json(e2b.sandbox_json(&sandbox))))
}

pub(crate) async fn fork(
    State(e2b): State<Arc<E2b>>,
    ControlCall(caller): ControlCall,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<impl IntoResponse, E2bError> {
    let parent = e2b.owned(&caller, &id).await?;
    let asked: TimeoutBody = body(&bytes)?;
    let count = asked.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return Err(E2bError::bad_request(format!("count must be 1 to {MAX_FORKS}")));
    }
    let mut results = Vec::new();
    for _ in 0..count {
        results.push(match e2b.fork_one(&caller, &parent, asked.timeout).await {
            Ok(sandbox) => ForkResult { sandbox: Some(e2b.sandbox_json(&sandbox)), error: None },
            Err(e) => ForkResult { sandbox: None, error: Some(ForkError { code: e.status.as_u16(), message: e.message }) },
        });
    }
    Ok((StatusCode::CREATED, Json(results)))
}

/// The most forks one call makes.
const MAX_FORKS: u32 = anypath_wire::MAX_FORKS_PER_CALL;

/// Filters and paging of the sandbox lists.
#[derive(Debug, Default)]
struct ListQuery {
    states: Vec<SandboxState>,
    metadata: Vec<(String, String)>,
    limit: Option<usize>,
    /// Where the previous page ended.
    after: Option<Cursor>,
    /// Oldest first; E2B lists newest first unless asked.
    ascending: bool,
    started_after: Option<SystemTime>,
    template: Option<String>,
}

/// A place in a sandbox list: the start time and id of the last sandbox a
/// page held (the next page starts after it, even when that one has ended).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Cursor {
    started_nanos: u128,
    id: String,
}

impl Cursor {
    fn of(sandbox: &Sandbox) -> Self {
        let started_nanos = sandbox.started_at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        Self { started_nanos, id: sandbox.id.clone() }
    }

    fn token(&self) -> String {
        format!("{}.{}", self.started_nanos, self.id)
    }

    fn parse(token: &str) -> Result<Self, E2bError> {
        let bad = || E2bError::bad_request("nextToken is not one this server gave");
        let (nanos, id) = token.split_once('.').ok_or_else(bad)?;
        Ok(Self { started_nanos: nanos.parse().map_err(|_| bad())?, id: id.to_owned() })
    }
}

impl ListQuery {
    fn parse(raw: Option<&str>) -> Result<Self, E2bError> {
        let mut query = Self::default();
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "state" => {
                    for state in value.split(',').filter(|s| !s.is_empty()) {
                        query.states.push(match state {
                            "running" => SandboxState::Running,
                            "paused" => SandboxState::Paused,
                            other => return Err(E2bError::bad_request(format!("state {other:?} is not running or paused"))),
                        });
                    }
                }
                // `k=v&k2=v2`, each part quoted once more by the SDK.
                "metadata" => query.metadata.extend(url::form_urlencoded::parse(value.as_bytes()).map(|(k, v)| (unquote(&k), unquote(&v)))),
                "limit" => query.limit = Some(value.parse().map_err(|_| E2bError::bad_request("limit must be a positive number"))?),
                "nextToken" => query.after = Some(Cursor::parse(&value)?),
                "order" => {
                    query.ascending = match value.as_ref() {
                        "asc" => true,
                        "desc" => false,
                        other => return Err(E2bError::bad_request(format!("order {other:?} is not asc or desc"))),
                    }
                }
                "startedAfter" => {
                    let time = chrono::DateTime::parse_from_rfc3339(&value).map_err(|_| E2bError::bad_request("startedAfter must be an RFC 3339 time"))?;
                    query.started_after = Some(SystemTime::from(time));
                }
                "template" => query.template = Some(value.into_owned()),
                _ => {}
            }
        }
        Ok(query)
    }

    /// Whether `sandbox` is one the query asks for (its state aside).
    fn admits(&self, sandbox: &Sandbox) -> bool {
        self.metadata.iter().all(|(k, v)| sandbox.metadata.get(k) == Some(v))
            && self.started_after.is_none_or(|after| sandbox.started_at >= after)
            && self.template.as_ref().is_none_or(|template| &sandbox.template == template)
    }
}

fn unquote(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_else(|| text.to_owned())
}

/// `GET /v2/sandboxes` (running and paused unless filtered) and the first
/// API's `GET /sandboxes` (running only), newest first, paged with `x-next-token`.
pub(crate) async fn list_v2(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, RawQuery(raw): RawQuery) -> Result<Response, E2bError> {
    list(&e2b, &caller, raw, &[SandboxState::Running, SandboxState::Paused]).await
}

pub(crate) async fn list_v1(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, RawQuery(raw): RawQuery) -> Result<Response, E2bError> {
    list(&e2b, &caller, raw, &[SandboxState::Running]).await
}

async fn list(e2b: &E2b, caller: &Caller, raw: Option<String>, default_states: &[SandboxState]) -> Result<Response, E2bError> {
    let query = ListQuery::parse(raw.as_deref())?;
    let states = if query.states.is_empty() { default_states.to_vec() } else { query.states.clone() };
    let mut found: Vec<(Cursor, Arc<Sandbox>)> = e2b
        .registry
        .of_tenant(&caller.tenant)
        .await?
        .into_iter()
        .filter(|s| states.contains(&s.life().state) && query.admits(s))
        .map(|s| (Cursor::of(&s), s))
        .collect();
    found.sort_by(|a, b| if query.ascending { a.0.cmp(&b.0) } else { b.0.cmp(&a.0) });
    if let Some(after) = &query.after {
        found.retain(|(cursor, _)| if query.ascending { cursor > after } else { cursor < after });
    }
    let limit = query.limit.unwrap_or(usize::MAX).max(1);
    let next = (found.len() > limit).then(|| found[limit - 1].0.token());
    let page: Vec<SandboxDetail> = found.iter().take(limit).map(|(_, s)| e2b.detail(s)).collect();
    let mut response = Json(page).into_response();
    if let Some(value) = next.as_deref().and_then(super::error::header_value) {
        response.headers_mut().insert("x-next-token", value);
    }
    Ok(response)
}

/// Keeps the sandboxes' file up to date and ends every running sandbox
/// past its timeout (pausing those created with `autoPause`), once a
/// second, while the service lives.
pub(crate) fn spawn_reaper(e2b: std::sync::Weak<E2b>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let Some(e2b) = e2b.upgrade() else { return };
            let saving = e2b.clone();
            let _ = tokio::task::spawn_blocking(move || saving.registry.save()).await;
            let expired = match e2b.registry.expired(SystemTime::now()).await {
                Ok(expired) => expired,
                Err(error) => {
                    tracing::warn!(%error, "the E2B sandboxes could not be read; their timeouts wait");
                    continue;
                }
            };
            for sandbox in expired {
                let caller = e2b.service.tenant_caller(sandbox.tenant.clone(), &HeaderMap::new(), uuid::Uuid::new_v4().to_string());
                if sandbox.auto_pause {
                    if let Err(e) = e2b.pause(&caller, &sandbox, sandbox.auto_pause_memory).await {
                        tracing::warn!(sandbox = %sandbox.id, error = %e.message, "an expired sandbox could not be paused");
                    }
                } else if let Err(e) = e2b.kill(&caller, &sandbox).await {
                    tracing::warn!(sandbox = %sandbox.id, error = %e.message, "an expired sandbox could not be ended");
                }
            }
        }
    });
}
