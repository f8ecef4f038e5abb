//! `anypath up`: run this repository's Spin app without the Spin CLI.
//!
//! The sandbox host starts in the same process on its own listener
//! (`--sandbox-listen`, default 127.0.0.1:3001), which also serves the code
//! interpreter, so one command gives a user both faces; E2B's API for E2B's
//! SDKs listens beside it (`--e2b-listen`, default 127.0.0.1:3002;
//! `--no-e2b` turns it off). The app's
//! `sandbox_hosts` (the pool, here of one) and `sandbox_allowed` (its
//! allowlist entry) variables name it, unless `SPIN_VARIABLE_SANDBOX_HOSTS`
//! is set: then the pool, its allowlist entry and its token come from the
//! environment. The components' calls to the own listener are handed to the
//! sandbox's HTTP API in process, after the same outbound-host check, so the
//! port serves only outside callers. Ctrl-C stops both.
//!
//! One authentication for every listener: the app's `auth_token` and
//! `api_keys` are also what the sandbox listener (its interpreter API, MCP,
//! REST blocks, Jupyter) and E2B's listener ask for; the app's own
//! components present a token of the process's own. Without either, both
//! stay open, on loopback by default, for local work.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use anypath_spin_host::app::{App, AppConfig, LocalService};
use http_body_util::BodyExt;
use tower::ServiceExt;
use tokio::sync::watch;

use crate::cli::RunnerArgs;
use anypath_service::serve::{ServeOptions, routers, serve_on, serve_router, shutdown_signal};

/// Options of `anypath up`.
pub struct UpOptions {
    pub manifest: PathBuf,
    pub listen: SocketAddr,
    /// The runtime configuration file, as `spin up --runtime-config-file` reads it.
    pub runtime_config: Option<PathBuf>,
    pub kv_path: Option<PathBuf>,
    /// The sandbox service's own listener.
    pub sandbox_listen: SocketAddr,
    /// E2B's API's listener, when it is served.
    pub e2b_listen: Option<SocketAddr>,
    /// `key:tenant` pairs of the code interpreter (the app's `api_keys` are added).
    pub api_keys: Vec<(String, String)>,
    /// Which environment variable names a run may set.
    pub run_env: anypath_service::run_env::RunEnvPolicy,
    /// Where Jupyter's kernels keep their files.
    pub jupyter_kernel_files: anypath_service::jupyter::KernelFiles,
    /// Execution slots and queue places of the sandbox service.
    pub admission: anypath_service::admission::AdmissionConfig,
    pub interpreter: anypath_interpreter::InterpreterConfig,
    /// `Host` values `/mcp` answers.
    pub mcp_allowed_hosts: Vec<String>,
    /// Which web pages on other origins may call the sandbox listener.
    pub cors: anypath_rest::cors::CorsPolicy,
    /// The hosts runs' callbacks may go to.
    pub callbacks: anypath_service::background_runs::CallbackPolicy,
    /// How long a graceful stop waits for background runs.
    pub drain_runs: std::time::Duration,
}

/// Runs the app until Ctrl-C or SIGTERM.
pub async fn up(options: UpOptions, runner: &RunnerArgs, sharing: &crate::session_sharing::SharingArgs) -> anyhow::Result<()> {
    let sandbox_listener = tokio::net::TcpListener::bind(options.sandbox_listen)
        .await
        .with_context(|| format!("binding the sandbox listener {}", options.sandbox_listen))?;
    let sandbox_address = sandbox_listener.local_addr()?;
    let e2b_listener = match options.e2b_listen {
        Some(address) => Some(tokio::net::TcpListener::bind(address).await.with_context(|| format!("binding the E2B listener {address} (--no-e2b turns it off)"))?),
        None => None,
    };
    // The app's components present it to the sandbox listener to act for a
    // tenant: the operator's `sandbox_token` when set, else one of this process.
    let given_token = std::env::var("SPIN_VARIABLE_SANDBOX_TOKEN").ok().filter(|t| !t.is_empty());
    let trusted_token = given_token.clone().unwrap_or_else(random_secret);
    let own_sandbox = std::env::var_os("SPIN_VARIABLE_SANDBOX_HOSTS").is_none();
    let mut overrides = HashMap::new();
    if own_sandbox {
        overrides.insert("sandbox_hosts".to_owned(), sandbox_address.to_string());
        overrides.insert("sandbox_allowed".to_owned(), sandbox_address.to_string());
        if given_token.is_none() {
            overrides.insert("sandbox_token".to_owned(), trusted_token.clone());
        }
    }
    let config = AppConfig {
        manifest: options.manifest.clone(),
        runtime_config: options.runtime_config,
        kv_path: options.kv_path,
        variable_overrides: overrides,
        local_services: HashMap::new(),
        // The components' native code is cached beside the runner's.
        native_cache: Some(runner.cache_dir()),
        gate: None,
    };
    // Refuse an app Spin would refuse before the sandbox starts.
    let (mut config, checked) = tokio::task::spawn_blocking(move || App::check(&config).map(|checked| (config, checked)))
        .await
        .context("checking the app")??;
    let credentials = AppCredentials::of(&checked, options.api_keys);
    let gate = std::sync::Arc::new(crate::app_gate::TenantGate::new(credentials.api_keys.clone()));
    let app_requests = gate.admission();
    config.gate = Some(gate);

    let sandbox = runner.start().await?;
    let interpreter = sharing.open(runner.session_sandboxes(&sandbox).await?, options.interpreter.clone()).await?;
    let interpreter = runner.with_shell(interpreter).await?;
    let (stop, stopped) = watch::channel(false);
    let wait = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let interpreter = std::sync::Arc::new(interpreter);
    let sandbox_options = ServeOptions {
        listen: sandbox_address,
        token: credentials.token,
        admission: options.admission,
        api_keys: credentials.api_keys,
        interpreter: Some(interpreter.clone()),
        mcp_allowed_hosts: options.mcp_allowed_hosts,
        trusted_token: Some(trusted_token),
        cors: options.cors,
        e2b_listen: None,
        exec_like_every_route: true,
        run_env: options.run_env,
        jupyter_kernel_files: options.jupyter_kernel_files,
        app_requests: Some(app_requests),
        callbacks: options.callbacks,
        drain_runs: options.drain_runs,
    };
    // One state, so in-process calls and outside callers (E2B's too) share one admission.
    let routers = routers(sandbox, &sandbox_options);
    let sandbox_router = routers.sandbox;
    let service_state = routers.state;
    let mut e2b_address = "off".to_owned();
    let e2b_task = match (e2b_listener, routers.e2b) {
        (Some(listener), Some(e2b)) => {
            e2b_address = listener.local_addr()?.to_string();
            tracing::info!(listen = %e2b_address, "E2B API serving");
            Some(tokio::spawn(serve_router(listener, e2b, wait(stopped.clone()))))
        }
        _ => None,
    };
    let local_sandbox = in_process(sandbox_router.clone());
    let sandbox_task = tokio::spawn(serve_on(sandbox_listener, sandbox_router, wait(stopped.clone())));
    if own_sandbox {
        config.local_services.insert(sandbox_address.to_string(), local_sandbox);
    }
    let app = tokio::task::spawn_blocking(move || App::load(&config))
        .await
        .context("loading the app")??;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("binding {}", options.listen))?;
    tracing::info!(listen = %listener.local_addr()?, sandbox = %sandbox_address, e2b = %e2b_address, manifest = %options.manifest.display(), "app serving");
    let app_stopped = stopped.clone();
    let served = app.serve(listener, wait(app_stopped));
    tokio::pin!(served);
    tokio::select! {
        result = &mut served => result?,
        () = shutdown_signal() => {}
    }
    let _ = stop.send(true);
    let _ = sandbox_task.await;
    if let Some(task) = e2b_task {
        let _ = task.await;
    }
    anypath_service::serve::Routers::stop(service_state).await;
    tracing::info!("stopped");
    Ok(())
}

/// What the sandbox and E2B listeners ask of outside callers: the app's own.
struct AppCredentials {
    /// The app's `auth_token`, as a bearer token.
    token: Option<String>,
    /// `--api-keys` and the app's `api_keys`.
    api_keys: Vec<(String, String)>,
}

impl AppCredentials {
    /// The app's `auth_token` and `api_keys` over the command line's keys. An
    /// `api_keys` the app cannot use (the gateway refuses to serve then)
    /// closes the listeners to every outside caller rather than opening them.
    fn of(app: &anypath_spin_host::app::CheckedApp, mut api_keys: Vec<(String, String)>) -> Self {
        let mut token = app.variable("auth_token").filter(|t| !t.is_empty());
        match anypath_rest::caller::parse_api_keys(&app.variable("api_keys").unwrap_or_default()) {
            Ok(keys) => api_keys.extend(keys),
            Err(e) => {
                tracing::error!(error = %e, "the app's api_keys cannot be used: the sandbox listeners refuse every outside caller");
                token = Some(token.unwrap_or_else(random_secret));
            }
        }
        let guarded = token.is_some() || !api_keys.is_empty();
        tracing::info!(auth_token = token.is_some(), api_keys = api_keys.len(), guarded, "sandbox listeners' credentials");
        Self { token, api_keys }
    }
}

/// A secret nobody else knows: 64 hex digits from two random UUIDs.
fn random_secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Wraps an axum router as a service the app's components reach in process.
fn in_process(router: axum::Router) -> LocalService {
    std::sync::Arc::new(move |request| {
        let router = router.clone();
        Box::pin(async move {
            let request = request.map(axum::body::Body::new);
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            response.map(|body| {
                body.map_err(|e| wasmtime_wasi_http::p2::bindings::http::types::ErrorCode::InternalError(Some(e.to_string())).into())
                    .boxed_unsync()
            })
        })
    })
}
