//! `/api/kernelspecs` and `/api/kernels`, with the status codes Jupyter's
//! clients check: start 201, restart 200 with the model, interrupt and
//! shut down 204.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::JupyterError;
use super::kernels::{Kernel, Record};
use super::{Jupyter, JupyterCaller, specs};
use crate::interpreter_service::{Caller, ServiceError};

/// How often a shut-down kernel's cell is interrupted until it lets go.
const INTERRUPT_EVERY: Duration = Duration::from_millis(200);

/// A kernel as `/api/kernels` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct KernelModel {
    id: String,
    name: String,
    last_activity: String,
    execution_state: &'static str,
    connections: usize,
}

impl KernelModel {
    fn of(kernel: &Kernel) -> Self {
        let activity = kernel.peek();
        Self {
            id: kernel.record.id.clone(),
            name: kernel.record.spec.clone(),
            last_activity: super::message::timestamp(activity.last),
            execution_state: if activity.busy { "busy" } else { "idle" },
            connections: kernel.connections.load(Ordering::SeqCst),
        }
    }
}

/// `POST /api/kernels`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartKernel {
    name: Option<String>,
    env: BTreeMap<String, String>,
}

#[derive(Serialize)]
pub(crate) struct Version {
    version: &'static str,
}

/// `GET /api`: the server's version, as Jupyter servers answer it.
pub(crate) async fn version() -> Json<Version> {
    Json(Version { version: env!("CARGO_PKG_VERSION") })
}

/// `GET /api/kernelspecs`.
pub(crate) async fn list_specs(State(jupyter): State<Arc<Jupyter>>, _caller: JupyterCaller) -> impl IntoResponse {
    Json(specs::list(&jupyter.specs))
}

/// `GET /api/kernelspecs/{name}`.
pub(crate) async fn get_spec(State(jupyter): State<Arc<Jupyter>>, _caller: JupyterCaller, Path(name): Path<String>) -> Result<impl IntoResponse, JupyterError> {
    let spec = jupyter.specs.iter().find(|s| s.name == name).ok_or_else(|| JupyterError::new(StatusCode::NOT_FOUND, format!("Kernel spec {name} not found")))?;
    Ok(Json(spec.model()))
}

/// `GET /api/kernels`: the caller's kernels.
pub(crate) async fn list_kernels(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller) -> Result<impl IntoResponse, JupyterError> {
    Ok(Json(jupyter.kernels.of_tenant(&caller.tenant).await?.iter().map(|k| KernelModel::of(k)).collect::<Vec<_>>()))
}

/// `POST /api/kernels`: a new session behind a new kernel id.
pub(crate) async fn start_kernel(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller, body: Bytes) -> Result<Response, JupyterError> {
    let asked: StartKernel = if body.iter().all(u8::is_ascii_whitespace) {
        StartKernel::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| JupyterError::bad_request(format!("the request body is not a kernel to start: {e}")))?
    };
    let name = asked.name.filter(|n| !n.is_empty()).unwrap_or_else(|| specs::DEFAULT_SPEC.to_owned());
    let spec = jupyter.specs.iter().find(|s| s.name == name).ok_or_else(|| JupyterError::new(StatusCode::NOT_FOUND, format!("No such kernel named {name}")))?;
    let id = uuid::Uuid::new_v4().to_string();
    let session_id = format!("jupyter-{}", id.replace('-', ""));
    jupyter.open_kernel_session(&caller, &session_id, spec.runtime).await?;
    // Enterprise Gateway's convention: the client's KERNEL_* variables reach the kernel.
    let env = asked.env.into_iter().filter(|(k, _)| k.starts_with("KERNEL_")).collect();
    let record = Record { id: id.clone(), tenant: caller.tenant.clone(), spec: spec.name.to_owned(), session_id, env };
    jupyter.learn_python_version(&caller, spec.name, &record.session_id).await;
    let kernel = jupyter.kernels.insert(record).await?;
    tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, kernel = %id, spec = spec.name, "kernel started");
    let model = KernelModel::of(&kernel);
    let location = HeaderValue::from_str(&format!("/api/kernels/{}", model.id)).ok();
    let mut response = (StatusCode::CREATED, Json(model)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `GET /api/kernels/{id}`.
pub(crate) async fn get_kernel(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller, Path(id): Path<String>) -> Result<impl IntoResponse, JupyterError> {
    let kernel = jupyter.kernel(&caller, &id).await?;
    Ok(Json(KernelModel::of(&kernel)))
}

/// `DELETE /api/kernels/{id}`: answered at once, busy or not, as a Jupyter
/// server answers it: the running cell is interrupted, the kernel is gone
/// and its sockets close; its session follows as soon as the cell lets go.
pub(crate) async fn shut_down(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller, Path(id): Path<String>) -> Result<StatusCode, JupyterError> {
    let kernel = jupyter.kernel(&caller, &id).await?;
    jupyter.shut_down(&caller, &kernel).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/kernels/{id}/interrupt`: the running cell ends with `KeyboardInterrupt`.
pub(crate) async fn interrupt(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller, Path(id): Path<String>) -> Result<StatusCode, JupyterError> {
    let kernel = jupyter.kernel(&caller, &id).await?;
    jupyter.service.interrupt(&caller, &kernel.record.session_id);
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/kernels/{id}/restart`: a fresh namespace over the same files.
pub(crate) async fn restart(State(jupyter): State<Arc<Jupyter>>, JupyterCaller(caller): JupyterCaller, Path(id): Path<String>) -> Result<impl IntoResponse, JupyterError> {
    let kernel = jupyter.kernel(&caller, &id).await?;
    jupyter.restart(&caller, &kernel).await?;
    Ok(Json(KernelModel::of(&kernel)))
}

impl Jupyter {
    /// Stops the kernel's run and forgets it (its sockets close); its
    /// session is removed in the background, never waited for here.
    pub(crate) async fn shut_down(&self, caller: &Caller, kernel: &Kernel) -> Result<(), JupyterError> {
        self.service.interrupt(caller, &kernel.record.session_id);
        self.kernels.remove(&kernel.record.id).await?;
        kernel.shut();
        self.close_session(caller.next_request(), kernel.record.session_id.clone());
        tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, kernel = %kernel.record.id, "kernel shut down");
        Ok(())
    }

    /// Removes a shut-down kernel's session (its Python state; its files
    /// too when they are its own) once its cell has let go of it. The cell
    /// is interrupted until then: one that had not yet started when the
    /// kernel was shut down is stopped as well.
    fn close_session(&self, caller: Caller, session_id: String) {
        let service = self.service.clone();
        tokio::spawn(async move {
            let close = service.call(&caller, anypath_interpreter::sessions::CloseSession { session_id: session_id.clone() });
            tokio::pin!(close);
            let mut every = tokio::time::interval(INTERRUPT_EVERY);
            let closed = loop {
                tokio::select! {
                    closed = &mut close => break closed,
                    _ = every.tick() => service.interrupt(&caller, &session_id),
                }
            };
            match closed {
                Ok(_) | Err(ServiceError::Interpreter(anypath_interpreter::InterpreterError::NoSuchSession(_))) => {}
                Err(error) => tracing::warn!(tenant = %caller.tenant, session = %session_id, %error, "a shut-down kernel's session stays until its TTL"),
            }
        });
    }

    /// Stops the kernel's run and starts its namespace afresh, telling
    /// every socket `idle` under the new header session. (A `restarting`
    /// status from the kernel itself would read as an automatic restart.)
    pub(crate) async fn restart(&self, caller: &Caller, kernel: &Kernel) -> Result<(), JupyterError> {
        self.service.interrupt(caller, &kernel.record.session_id);
        kernel.abort_queued();
        // The interrupted cell lets go of the session before it restarts.
        let _running = kernel.queue.lock().await;
        self.service.call(caller, anypath_interpreter::sessions::RestartSession { session_id: kernel.record.session_id.clone() }).await?;
        kernel.restarted();
        let empty = serde_json::Map::new();
        kernel.publish(kernel.sender().frame("status", "iopub", &empty, &serde_json::json!({ "execution_state": "idle" })));
        Ok(())
    }
}
