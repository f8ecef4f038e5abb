//! The E2B sandboxes this process serves: each is one interpreter session
//! (its default code context) plus what E2B's API says about it and
//! anypath's sessions do not keep: template, metadata, environment, end of
//! life, paused or running, access token, extra code contexts.
//!
//! Kept in memory, and written (when it changed, within a second) to a
//! file beside the sessions, so a restarted service knows its sandboxes
//! again: their sessions' files and hibernated state are on disk already.
//!
//! When sessions are shared between hosts, the sandboxes are too: each is
//! a shared record, read afresh on every call (any host may have paused it
//! or run in it since) and written through on every change, part by part,
//! so a pause on one host and a run's count on another do not undo each
//! other. The table here is then only a cache of what was read.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anypath_interpreter::InterpreterError;
use anypath_interpreter::shared_records::{Fields, SharedRecords};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The kind of the sandboxes' shared records.
const KIND: &str = "e2b-sandbox";
/// Record fields: what never changes, then each part of [`Lifecycle`].
const FIXED: &str = "sandbox";
const STATE: &str = "state";
const END_AT: &str = "end_at";
const CONTEXTS: &str = "contexts";
const EXECUTIONS: &str = "executions";

/// A part of a sandbox's lifecycle a call changed (written alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    State,
    EndAt,
    Contexts,
    Executions,
}

/// The state E2B reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SandboxState {
    Running,
    Paused,
}

/// A code context of a sandbox: an interpreter session over its files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CodeContext {
    /// The id clients name it by.
    pub id: String,
    /// The interpreter session behind it.
    pub session_id: String,
    /// Always `python`.
    pub language: String,
    /// The working directory the client asked for (reported back as given).
    pub cwd: String,
    /// Cells run so far, failed ones included (Jupyter's count).
    pub executions: u64,
}

/// What changes over a sandbox's life.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Lifecycle {
    pub state: SandboxState,
    /// When a running sandbox ends (or pauses, with `auto_pause`).
    pub end_at: SystemTime,
    /// Contexts beyond the default one, in creation order.
    pub contexts: Vec<CodeContext>,
    /// The default context's run count.
    pub executions: u64,
}

/// One E2B sandbox.
#[derive(Debug)]
pub(crate) struct Sandbox {
    pub id: String,
    pub tenant: String,
    pub template: String,
    /// Identifies this process to clients (E2B's `clientID`).
    pub client_id: String,
    /// Present for a secure sandbox: envd and `/execute` calls must carry it.
    pub access_token: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// Environment every run sees (a run's own variables win).
    pub env_vars: BTreeMap<String, String>,
    pub started_at: SystemTime,
    /// Pause instead of ending when the timeout passes.
    pub auto_pause: bool,
    /// Whether that pause keeps the Python state (E2B's `autoPauseMemory`);
    /// without it the sandbox boots afresh over its files when resumed.
    pub auto_pause_memory: bool,
    pub life: Mutex<Lifecycle>,
}

impl Sandbox {
    /// The lifecycle, even after a panic elsewhere held its lock.
    pub fn life(&self) -> std::sync::MutexGuard<'_, Lifecycle> {
        self.life.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `presented` is this sandbox's access token (always, for a
    /// sandbox without one). Compared as digests, in constant time per byte.
    pub fn admits(&self, presented: Option<&str>) -> bool {
        match (&self.access_token, presented) {
            (None, _) => true,
            (Some(token), Some(presented)) => {
                let (a, b) = (Sha256::digest(token.as_bytes()), Sha256::digest(presented.as_bytes()));
                a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
            }
            (Some(_), None) => false,
        }
    }

    /// The session of context `id` (`None`: the default context, this
    /// sandbox's own session).
    pub fn context_session(&self, id: Option<&str>) -> Option<String> {
        match id {
            None => Some(self.id.clone()),
            Some(id) if id == self.id => Some(self.id.clone()),
            Some(id) => self.life().contexts.iter().find(|c| c.id == id).map(|c| c.session_id.clone()),
        }
    }

    /// Every session of the sandbox: its own, then its extra contexts'.
    pub fn sessions(&self) -> Vec<String> {
        std::iter::once(self.id.clone()).chain(self.life().contexts.iter().map(|c| c.session_id.clone())).collect()
    }

    /// Counts a cell run in context `id` and gives its execution number.
    pub fn count_execution(&self, id: Option<&str>) -> u64 {
        let mut life = self.life();
        let counter = match id {
            Some(id) if id != self.id => match life.contexts.iter_mut().find(|c| c.id == id) {
                Some(context) => &mut context.executions,
                None => return 0,
            },
            _ => &mut life.executions,
        };
        *counter += 1;
        *counter
    }
}

/// A sandbox as the registry's file keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    id: String,
    tenant: String,
    template: String,
    client_id: String,
    access_token: Option<String>,
    metadata: BTreeMap<String, String>,
    env_vars: BTreeMap<String, String>,
    started_at: SystemTime,
    auto_pause: bool,
    /// Absent in records written before it existed: pauses kept the state.
    #[serde(default = "keeps_memory")]
    auto_pause_memory: bool,
    life: Lifecycle,
}

fn keeps_memory() -> bool {
    true
}

impl From<&Sandbox> for Saved {
    fn from(s: &Sandbox) -> Self {
        Self {
            id: s.id.clone(),
            tenant: s.tenant.clone(),
            template: s.template.clone(),
            client_id: s.client_id.clone(),
            access_token: s.access_token.clone(),
            metadata: s.metadata.clone(),
            env_vars: s.env_vars.clone(),
            started_at: s.started_at,
            auto_pause: s.auto_pause,
            auto_pause_memory: s.auto_pause_memory,
            life: s.life().clone(),
        }
    }
}

impl From<Saved> for Sandbox {
    fn from(s: Saved) -> Self {
        Self {
            id: s.id,
            tenant: s.tenant,
            template: s.template,
            client_id: s.client_id,
            access_token: s.access_token,
            metadata: s.metadata,
            env_vars: s.env_vars,
            started_at: s.started_at,
            auto_pause: s.auto_pause,
            auto_pause_memory: s.auto_pause_memory,
            life: Mutex::new(s.life),
        }
    }
}

/// Every sandbox this process serves, by id.
#[derive(Default)]
pub(crate) struct Registry {
    sandboxes: Mutex<HashMap<String, Arc<Sandbox>>>,
    /// Where the sandboxes are kept between processes.
    file: Option<PathBuf>,
    /// What the file holds now.
    written: Mutex<Vec<u8>>,
    /// The fleet's records, when sessions are shared between hosts.
    shared: Option<Arc<dyn SharedRecords>>,
}

impl Registry {
    /// The registry kept in `file`, with the sandboxes an earlier process
    /// left there (an unreadable file is set aside and the registry starts empty).
    pub fn load(file: PathBuf) -> Self {
        let mut sandboxes = HashMap::new();
        let mut written = Vec::new();
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<Vec<Saved>>(&bytes) {
                Ok(saved) => {
                    sandboxes = saved.into_iter().map(|s| (s.id.clone(), Arc::new(Sandbox::from(s)))).collect();
                    written = bytes;
                }
                Err(error) => {
                    tracing::warn!(file = %file.display(), %error, "the E2B sandboxes file does not parse; starting without it");
                    let _ = std::fs::rename(&file, file.with_extension("json.unreadable"));
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!(file = %file.display(), %error, "the E2B sandboxes file cannot be read"),
        }
        Self { sandboxes: Mutex::new(sandboxes), file: Some(file), written: Mutex::new(written), shared: None }
    }

    /// The registry of a fleet: every sandbox is a shared record (no file).
    pub fn shared(records: Arc<dyn SharedRecords>) -> Self {
        Self { shared: Some(records), ..Self::default() }
    }

    /// Writes the file when the sandboxes changed since it was written
    /// (beside it, then renamed over it). Blocking: call it off the async workers.
    pub fn save(&self) {
        let Some(file) = &self.file else { return };
        let mut saved: Vec<Saved> = self.cached_all().iter().map(|s| Saved::from(s.as_ref())).collect();
        saved.sort_by(|a, b| a.id.cmp(&b.id));
        let Ok(bytes) = serde_json::to_vec(&saved) else { return };
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if *written == bytes {
            return;
        }
        let partial = file.with_extension("json.partial");
        match std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, file)) {
            Ok(()) => *written = bytes,
            Err(error) => tracing::warn!(file = %file.display(), %error, "the E2B sandboxes file was not written"),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Sandbox>>> {
        self.sandboxes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a sandbox (to the fleet's records first, when shared).
    pub async fn insert(&self, sandbox: Sandbox) -> Result<Arc<Sandbox>, InterpreterError> {
        if let Some(shared) = &self.shared {
            shared.write(KIND, &sandbox.id, fields(&Saved::from(&sandbox), &[Part::State, Part::EndAt, Part::Contexts, Part::Executions])?).await?;
        }
        let sandbox = Arc::new(sandbox);
        self.table().insert(sandbox.id.clone(), sandbox.clone());
        Ok(sandbox)
    }

    /// Writes the parts of the sandbox's lifecycle a call changed to the
    /// fleet's records (the file here is written by [`Self::save`]).
    pub async fn changed(&self, sandbox: &Sandbox, parts: &[Part]) -> Result<(), InterpreterError> {
        let Some(shared) = &self.shared else { return Ok(()) };
        let mut written = fields(&Saved::from(sandbox), parts)?;
        written.remove(FIXED);
        shared.write(KIND, &sandbox.id, written).await
    }

    /// The sandbox `id`, whoever owns it: on a fleet, as its record says now.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Sandbox>>, InterpreterError> {
        let Some(shared) = &self.shared else { return Ok(self.table().get(id).cloned()) };
        match shared.read(KIND, id).await? {
            Some(record) => Ok(Some(self.cached(id, &record)?)),
            None => {
                self.table().remove(id);
                Ok(None)
            }
        }
    }

    /// The sandbox `id` when `tenant` owns it: another tenant's is as absent.
    pub async fn owned(&self, tenant: &str, id: &str) -> Result<Option<Arc<Sandbox>>, InterpreterError> {
        Ok(self.get(id).await?.filter(|s| s.tenant == tenant))
    }

    /// Removes the sandbox (from the fleet's records too, when shared).
    pub async fn remove(&self, id: &str) -> Result<Option<Arc<Sandbox>>, InterpreterError> {
        if let Some(shared) = &self.shared {
            shared.remove(KIND, id).await?;
        }
        Ok(self.table().remove(id))
    }

    /// The tenant's sandboxes, oldest first.
    pub async fn of_tenant(&self, tenant: &str) -> Result<Vec<Arc<Sandbox>>, InterpreterError> {
        let mut found: Vec<_> = self.all().await?.into_iter().filter(|s| s.tenant == tenant).collect();
        found.sort_by(|a, b| a.started_at.cmp(&b.started_at).then_with(|| a.id.cmp(&b.id)));
        Ok(found)
    }

    /// Running sandboxes whose end has passed.
    pub async fn expired(&self, now: SystemTime) -> Result<Vec<Arc<Sandbox>>, InterpreterError> {
        Ok(self
            .all()
            .await?
            .into_iter()
            .filter(|s| {
                let life = s.life();
                life.state == SandboxState::Running && life.end_at <= now
            })
            .collect())
    }

    /// Every sandbox (of the whole fleet, when shared).
    pub async fn all(&self) -> Result<Vec<Arc<Sandbox>>, InterpreterError> {
        let Some(shared) = &self.shared else { return Ok(self.cached_all()) };
        let records = shared.list(KIND).await?;
        let mut found = Vec::with_capacity(records.len());
        for (id, record) in &records {
            match self.cached(id, record) {
                Ok(sandbox) => found.push(sandbox),
                Err(error) => tracing::warn!(sandbox = %id, %error, "a shared sandbox record does not parse"),
            }
        }
        let listed: std::collections::HashSet<&str> = records.iter().map(|(id, _)| id.as_str()).collect();
        self.table().retain(|id, _| listed.contains(id.as_str()));
        Ok(found)
    }

    /// Every sandbox this process knows, without asking the fleet.
    fn cached_all(&self) -> Vec<Arc<Sandbox>> {
        self.table().values().cloned().collect()
    }

    /// The sandbox a shared record describes, as the table's entry (kept,
    /// with its lifecycle brought up to date, when it is there already).
    fn cached(&self, id: &str, record: &Fields) -> Result<Arc<Sandbox>, InterpreterError> {
        let saved = from_fields(record)?;
        let mut table = self.table();
        if let Some(known) = table.get(id) {
            *known.life() = saved.life;
            return Ok(known.clone());
        }
        let sandbox = Arc::new(Sandbox::from(saved));
        table.insert(id.to_owned(), sandbox.clone());
        Ok(sandbox)
    }
}

/// The record fields of `saved`: what never changes, and the named parts.
fn fields(saved: &Saved, parts: &[Part]) -> Result<Fields, InterpreterError> {
    let mut fields = Fields::new();
    fields.insert(FIXED.to_owned(), json(saved)?);
    for part in parts {
        let (name, value) = match part {
            Part::State => (STATE, json(&saved.life.state)?),
            Part::EndAt => (END_AT, json(&saved.life.end_at)?),
            Part::Contexts => (CONTEXTS, json(&saved.life.contexts)?),
            Part::Executions => (EXECUTIONS, saved.life.executions.to_string()),
        };
        fields.insert(name.to_owned(), value);
    }
    Ok(fields)
}

/// The sandbox a record describes: its fixed part, then each lifecycle
/// part written since.
fn from_fields(record: &Fields) -> Result<Saved, InterpreterError> {
    let bad = |e: &dyn std::fmt::Display| InterpreterError::SharedStore(format!("a sandbox record does not parse: {e}"));
    let fixed = record.get(FIXED).ok_or_else(|| bad(&"it has no fixed part"))?;
    let mut saved: Saved = serde_json::from_str(fixed).map_err(|e| bad(&e))?;
    if let Some(state) = record.get(STATE) {
        saved.life.state = serde_json::from_str(state).map_err(|e| bad(&e))?;
    }
    if let Some(end_at) = record.get(END_AT) {
        saved.life.end_at = serde_json::from_str(end_at).map_err(|e| bad(&e))?;
    }
    if let Some(contexts) = record.get(CONTEXTS) {
        saved.life.contexts = serde_json::from_str(contexts).map_err(|e| bad(&e))?;
    }
    if let Some(executions) = record.get(EXECUTIONS) {
        saved.life.executions = executions.parse().map_err(|e| bad(&e))?;
    }
    Ok(saved)
}

/// `value` as a record field.
fn json<T: Serialize>(value: &T) -> Result<String, InterpreterError> {
    serde_json::to_string(value).map_err(|e| InterpreterError::SharedStore(format!("a sandbox record: {e}")))
}

/// A new sandbox id: 20 lowercase letters and digits, like E2B's (and a
/// valid session id).
pub(crate) fn new_sandbox_id() -> String {
    anypath_interpreter::names::new_short_id()
}

/// A new access token (hex, 256 bits).
pub(crate) fn new_access_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// `now + seconds`, saturating.
pub(crate) fn after(now: SystemTime, seconds: u64) -> SystemTime {
    now.checked_add(Duration::from_secs(seconds)).unwrap_or(now)
}
