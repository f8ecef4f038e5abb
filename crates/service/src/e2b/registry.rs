//! The E2B sandboxes this process serves: each is one interpreter session
//! (its default code context) plus what E2B's API says about it and
//! anypath's sessions do not keep: template, metadata, environment, end of
//! life, paused or running, access token, extra code contexts.
//!
//! Kept in memory, and written (when it changed, within a second) to a
//! file beside the sessions, so a restarted service knows its sandboxes
//! again: their sessions' files and hibernated state are on disk already.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use sha2::{Digest, Sha256};

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
    life: Lifecycle,
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
        Self { sandboxes: Mutex::new(sandboxes), file: Some(file), written: Mutex::new(written) }
    }

    /// Writes the file when the sandboxes changed since it was written
    /// (beside it, then renamed over it). Blocking: call it off the async workers.
    pub fn save(&self) {
        let Some(file) = &self.file else { return };
        let mut saved: Vec<Saved> = self.all().iter().map(|s| Saved::from(s.as_ref())).collect();
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

    pub fn insert(&self, sandbox: Sandbox) -> Arc<Sandbox> {
        let sandbox = Arc::new(sandbox);
        self.table().insert(sandbox.id.clone(), sandbox.clone());
        sandbox
    }

    /// The sandbox `id`, whoever owns it.
    pub fn get(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.table().get(id).cloned()
    }

    /// The sandbox `id` when `tenant` owns it: another tenant's is as absent.
    pub fn owned(&self, tenant: &str, id: &str) -> Option<Arc<Sandbox>> {
        self.get(id).filter(|s| s.tenant == tenant)
    }

    pub fn remove(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.table().remove(id)
    }

    /// The tenant's sandboxes, oldest first.
    pub fn of_tenant(&self, tenant: &str) -> Vec<Arc<Sandbox>> {
        let mut found: Vec<_> = self.table().values().filter(|s| s.tenant == tenant).cloned().collect();
        found.sort_by(|a, b| a.started_at.cmp(&b.started_at).then_with(|| a.id.cmp(&b.id)));
        found
    }

    /// Running sandboxes whose end has passed.
    pub fn expired(&self, now: SystemTime) -> Vec<Arc<Sandbox>> {
        self.table().values().filter(|s| { let life = s.life(); life.state == SandboxState::Running && life.end_at <= now }).cloned().collect()
    }

    /// Every sandbox.
    pub fn all(&self) -> Vec<Arc<Sandbox>> {
        self.table().values().cloned().collect()
    }
}

/// A new sandbox id: 20 lowercase letters and digits, like E2B's (and a
/// valid session id).
pub(crate) fn new_sandbox_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let more = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().chain(more.iter()).take(20).map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect()
}

/// A new access token (hex, 256 bits).
pub(crate) fn new_access_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// `now + seconds`, saturating.
pub(crate) fn after(now: SystemTime, seconds: u64) -> SystemTime {
    now.checked_add(Duration::from_secs(seconds)).unwrap_or(now)
}
