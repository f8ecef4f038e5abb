//! Commands tracked by id, for the transports that let a command outlive
//! the request that started it: E2B's `process` service names them by pid,
//! `/v1` by `command_id`, and both read one registry. A command starts on a
//! task of its own through the facade ([`RunCommand`]), admitted and
//! audited like every run; its output is kept as it is written, so whoever
//! follows it reads it from the start or from any event on; its stdin stays
//! open for writes when it was asked for; and it can be stopped.
//!
//! A command leaves the running list when it ends (as a process leaves
//! `ps`); its end stays readable by its id, for the last
//! [`FINISHED_KEPT`] commands of its session.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anypath_interpreter::commands::{CommandStreams, RunCommand};
use anypath_sandbox::Interrupt;
use anypath_sandbox::shell::{OutputSink, StdinFeed, Stream};
use anypath_wire::{CommandReport, CommandRequest, RunState};
use axum::body::Bytes;
use serde_json::Value;

use crate::caller::Caller;
use crate::interpreter_service::InterpreterService;
use crate::service_error::ServiceError;

/// Ended commands whose end is kept per session, the oldest forgotten first.
pub(crate) const FINISHED_KEPT: usize = 64;
/// The first id handed out (a shell's own pids are small).
const FIRST_ID: u32 = 1000;

/// A session's commands: its tenant and its id.
type SessionKey = (String, String);

/// Every tracked command of this service, by tenant and session.
#[derive(Default)]
pub(crate) struct TrackedCommands {
    next_id: AtomicU32,
    sessions: Mutex<HashMap<SessionKey, SessionCommands>>,
}

#[derive(Default)]
struct SessionCommands {
    all: HashMap<u32, Arc<TrackedCommand>>,
    /// Ended commands' ids, oldest first.
    finished: VecDeque<u32>,
}

/// What starts a tracked command.
pub(crate) struct StartCommand {
    pub session_id: String,
    pub request: CommandRequest,
    /// Keep its stdin open for writes ([`TrackedCommand::stdin`]).
    pub with_stdin: bool,
    /// A name the transport finds it by besides its id (E2B's tag).
    pub tag: Option<String>,
    /// How the transport that started it describes it (E2B lists it back).
    pub config: Value,
}

/// One command: what started it, its stdin, its stop, its events.
pub(crate) struct TrackedCommand {
    pub id: u32,
    pub session_id: String,
    /// The command line.
    pub command: String,
    pub tag: Option<String>,
    pub config: Value,
    pub stdin: Option<StdinFeed>,
    /// When it was started (RFC 3339).
    pub started_at: String,
    interrupt: Interrupt,
    events: Mutex<Events>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Events {
    /// Every chunk of output so far, in order.
    data: Vec<(Stream, Bytes)>,
    end: Option<Ended>,
}

/// How a command ended.
#[derive(Clone)]
pub(crate) struct Ended {
    /// Its report, or why the service could not run it.
    pub report: Result<CommandReport, StoredError>,
    /// It was stopped ([`TrackedCommand::stop`]) before it ended by itself.
    pub stopped: bool,
    /// When (RFC 3339).
    pub ended_at: String,
}

/// A service error kept past its request: its status, code and message,
/// and the id of the request that started the command.
#[derive(Clone, Debug)]
pub(crate) struct StoredError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub request_id: String,
}

impl StoredError {
    /// The error as the service's envelope carries it.
    pub fn body(&self) -> anypath_wire::ErrorBody {
        anypath_wire::ErrorBody { code: self.code.to_owned(), message: self.message.clone(), request_id: self.request_id.clone() }
    }
}

impl TrackedCommand {
    fn push(&self, stream: Stream, bytes: Bytes) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).data.push((stream, bytes));
        self.changed.notify_waiters();
    }

    fn finish(&self, end: Ended) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).end = Some(end);
        self.changed.notify_waiters();
    }

    /// The output chunks from index `from` on, and the end once it came
    /// after them. Take [`Self::changed`] first, so no change is missed.
    pub fn since(&self, from: usize) -> (Vec<(Stream, Bytes)>, Option<Ended>) {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        (events.data.get(from..).unwrap_or_default().to_vec(), events.end.clone())
    }

    /// Resolves at the next chunk or at the end.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Its status as `/v1` tells it.
    pub fn status(&self) -> anypath_wire::CommandStatus {
        let (events, end) = {
            let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            (events.data.len() as u64, events.end.clone())
        };
        let (state, report, error, ended_at) = match end {
            None => (RunState::Running, None, None, None),
            Some(Ended { report: Ok(report), stopped, ended_at }) => (if stopped { RunState::Interrupted } else { RunState::Done }, Some(report), None, Some(ended_at)),
            Some(Ended { report: Err(error), ended_at, .. }) => (RunState::Failed, None, Some(error.body()), Some(ended_at)),
        };
        anypath_wire::CommandStatus {
            command_id: self.id.to_string(),
            session_id: self.session_id.clone(),
            state,
            command: self.command.clone(),
            started_at: self.started_at.clone(),
            ended_at,
            events,
            report,
            error,
        }
    }

    /// How it ended, once it has.
    pub fn ended(&self) -> Option<Ended> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).end.clone()
    }

    /// Stops it (SIGTERM and SIGKILL alike: a WASI instance has no signal
    /// handlers); it ends with exit status 130.
    pub fn stop(&self) {
        self.interrupt.interrupt();
    }
}

impl TrackedCommands {
    /// Starts `start` for `caller` on a task of its own and tracks it.
    pub(crate) fn start(self: &Arc<Self>, service: &InterpreterService, caller: Caller, start: StartCommand) -> Arc<TrackedCommand> {
        let command = Arc::new(TrackedCommand {
            id: FIRST_ID + self.next_id.fetch_add(1, Ordering::Relaxed),
            session_id: start.session_id.clone(),
            command: start.request.command.clone(),
            tag: start.tag,
            config: start.config,
            stdin: start.with_stdin.then(StdinFeed::new),
            started_at: now(),
            interrupt: Interrupt::new(),
            events: Mutex::new(Events::default()),
            changed: tokio::sync::Notify::new(),
        });
        let key = (caller.tenant.clone(), start.session_id.clone());
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).entry(key.clone()).or_default().all.insert(command.id, command.clone());
        let into = command.clone();
        let output: OutputSink = Arc::new(move |stream, bytes| into.push(stream, bytes));
        let streams = CommandStreams { output: Some(output), stdin: command.stdin.clone(), interrupt: Some(command.interrupt.clone()) };
        let (service, running, registry) = (service.clone(), command.clone(), Arc::downgrade(self));
        let run = RunCommand { session_id: start.session_id, request: start.request, streams };
        tokio::spawn(crate::interpreter_service::audit::carried(async move {
            let report = service.call(&caller, run).await;
            let report = report.map_err(|e| StoredError { status: e.status().as_u16(), code: e.code(), message: e.to_string(), request_id: caller.request_id.clone() });
            let stopped = running.interrupt.is_interrupted() && report.as_ref().is_ok_and(|r| r.error.is_some());
            // Off the running list first: whoever sees the end never lists it again.
            if let Some(registry) = registry.upgrade() {
                registry.ended(&key, running.id);
            }
            running.finish(Ended { report, stopped, ended_at: now() });
        }));
        command
    }

    fn ended(&self, key: &SessionKey, id: u32) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(session) = sessions.get_mut(key) else { return };
        session.finished.push_back(id);
        while session.finished.len() > FINISHED_KEPT {
            if let Some(old) = session.finished.pop_front() {
                session.all.remove(&old);
            }
        }
    }

    /// The session's command `id`, running or ended (while its end is kept).
    pub(crate) fn find(&self, tenant: &str, session_id: &str, id: u32) -> Option<Arc<TrackedCommand>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(&(tenant.to_owned(), session_id.to_owned())).and_then(|s| s.all.get(&id).cloned())
    }

    /// The session's command named by `command_id` as a client gives it,
    /// or `no_such_command` (what `/v1` and MCP answer alike).
    pub(crate) fn named(&self, tenant: &str, session_id: &str, command_id: &str) -> Result<Arc<TrackedCommand>, ServiceError> {
        command_id.parse().ok().and_then(|id| self.find(tenant, session_id, id)).ok_or_else(|| {
            ServiceError::NoSuchCommand(format!("no command {command_id} in session {session_id} (an ended command is kept for its session's last {FINISHED_KEPT} commands)"))
        })
    }

    /// The session's running commands, oldest first.
    pub(crate) fn running(&self, tenant: &str, session_id: &str) -> Vec<Arc<TrackedCommand>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(session) = sessions.get(&(tenant.to_owned(), session_id.to_owned())) else { return Vec::new() };
        let mut running: Vec<_> = session.all.values().filter(|c| !session.finished.contains(&c.id)).cloned().collect();
        running.sort_by_key(|c| c.id);
        running
    }

    /// Stops every command of a session going away, and forgets them.
    pub(crate) fn stop_session(&self, tenant: &str, session_id: &str) {
        let gone = self.sessions.lock().unwrap_or_else(PoisonError::into_inner).remove(&(tenant.to_owned(), session_id.to_owned()));
        for command in gone.into_iter().flat_map(|s| s.all.into_values()) {
            command.stop();
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
