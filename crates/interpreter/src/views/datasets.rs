//! Datasets as callers reach them: the ones a tenant sees (mounted or
//! staged), staging and removing its own, and attaching one to a session at
//! /data/<name>. The store itself is [`crate::stores::dataset_store`].

use std::path::PathBuf;
use std::sync::Arc;

use anypath_wire::{DatasetInfo, DatasetList};
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::Create;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};
use crate::stores::dataset_store::ReceivedFile;

/// The interpreter's datasets: see [`Interpreter::datasets`].
pub struct Datasets<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// Mounted and staged datasets, and their views in sessions.
    pub fn datasets(self: &Arc<Self>) -> Datasets<'_> {
        Datasets::of(self)
    }
}

impl<'a> Datasets<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// The datasets the tenant sees mounted or has staged.
    pub fn list(&self, tenant: &str) -> Result<Vec<DatasetInfo>, InterpreterError> {
        self.interpreter.dataset_store.list(&self.interpreter.artifact_store, names::tenant(tenant)?)
    }

    /// Where a body for a staged dataset is received before it is kept.
    pub fn staging_path(&self) -> Result<PathBuf, InterpreterError> {
        self.interpreter.artifact_store.staging_path()
    }

    /// Keeps `files` (received in the staging area, see
    /// [`Self::staging_path`]) as the tenant's dataset `name`.
    pub fn stage(&self, tenant: &str, name: &str, files: Vec<ReceivedFile>) -> Result<DatasetInfo, InterpreterError> {
        let tenant = match names::tenant(tenant) {
            Ok(tenant) => tenant,
            Err(e) => {
                files.iter().for_each(|f| drop(std::fs::remove_file(&f.path)));
                return Err(e.into());
            }
        };
        self.interpreter.dataset_store.stage(&self.interpreter.artifact_store, tenant, name, files)
    }

    /// Bytes the tenant may still stage as `name`.
    pub fn room(&self, tenant: &str, name: &str) -> Result<u64, InterpreterError> {
        self.interpreter.dataset_store.room(&self.interpreter.artifact_store, names::tenant(tenant)?, names::dataset(name)?)
    }

    /// Forgets the tenant's staged dataset `name`.
    pub fn remove(&self, tenant: &str, name: &str) -> Result<(), InterpreterError> {
        self.interpreter.dataset_store.remove(&self.interpreter.artifact_store, names::tenant(tenant)?, name)
    }

    /// Shows the tenant's staged dataset `name` in the session (created
    /// when new) at /data/<name>, read-only, from then on, this run's
    /// instance included; no byte is copied.
    pub fn attach(&self, tenant: &str, session_id: &str, name: &str) -> Result<DatasetInfo, InterpreterError> {
        let interpreter = self.interpreter;
        // Checked first, so a refused name creates no session either.
        names::dataset(name)?;
        let (session, _running) = interpreter.sessions().locked_now(tenant, session_id, Create::Yes { ttl: None, runtime: None })?;
        let info = interpreter.dataset_store.attach(&interpreter.artifact_store, &session.tenant, name, &session.datasets_view)?;
        {
            let mut attached = session.attached.lock().unwrap_or_else(|p| p.into_inner());
            if !attached.iter().any(|a| a == name) {
                attached.push(name.to_owned());
            }
        }
        session.write_meta()?;
        Ok(info)
    }
}

/// The datasets the caller's tenant sees mounted or has staged.
#[derive(Debug)]
pub struct ListDatasets;

impl Operation for ListDatasets {
    type Output = DatasetList;

    fn describe(&self) -> Described {
        Described::new(OperationKind::ListDatasets)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<DatasetList, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.datasets().list(&c.tenant).map(|datasets| DatasetList { datasets })))
    }
}

/// Keeps received files as the caller's dataset `name`.
#[derive(Debug)]
pub struct StageDataset {
    /// The dataset's name.
    pub name: String,
    /// Its files, received in the staging area.
    pub files: Vec<ReceivedFile>,
}

impl Operation for StageDataset {
    type Output = DatasetInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::StageDataset).subject(&self.name)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<DatasetInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.datasets().stage(&c.tenant, &self.name, self.files)))
    }
}

/// Forgets the caller's staged dataset `name`.
#[derive(Debug)]
pub struct RemoveDataset {
    /// The dataset's name.
    pub name: String,
}

impl Operation for RemoveDataset {
    type Output = ();

    fn describe(&self) -> Described {
        Described::new(OperationKind::RemoveDataset).subject(&self.name)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<(), InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.datasets().remove(&c.tenant, &self.name)))
    }
}

/// Shows the caller's staged dataset in the session at /data/<name>.
#[derive(Debug)]
pub struct AttachDataset {
    /// The session (created when new).
    pub session_id: String,
    /// The dataset's name.
    pub name: String,
}

impl Operation for AttachDataset {
    type Output = DatasetInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::AttachDataset).session(&self.session_id).subject(&self.name)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<DatasetInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.datasets().attach(&c.tenant, &self.session_id, &self.name)))
    }
}
