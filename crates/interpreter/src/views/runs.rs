//! Runs: code run in a session (created on first use), one run at a time,
//! with its output sent live when asked; the files a successful run created
//! or changed are kept as artifacts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use anypath_sandbox::{CellRequest, Interrupt, LiveSink};
use anypath_wire::{ArtifactFailure, FileInfo, RunReport, RunRequest};
use futures_util::future::BoxFuture;

use crate::directory::session_files::SessionFiles;
use crate::error::InterpreterError;
use crate::gates::files_gate::Picture;
use crate::held::session::{Create, Session};
use crate::held::stats::Stats;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind};
use crate::stores::artifact_store::Artifact;
use crate::views::cell_magics;
use crate::views::escapes::Escapes;

/// Environment a run may pass: this many variables, each name and value bounded.
const MAX_ENV_VARS: usize = 64;
const MAX_ENV_VALUE_BYTES: usize = 4096;

/// The interpreter's runs: see [`Interpreter::runs`].
pub struct Runs<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// Running code in sessions.
    pub fn runs(self: &Arc<Self>) -> Runs<'_> {
        Runs::of(self)
    }
}

impl<'a> Runs<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// Runs code in the session (created on first use), one run at a time;
    /// the caller writes the run's log line (it knows the request).
    /// Files the run created or changed become artifacts linked under
    /// `base_url`. Finding the session, scanning its files and hashing what
    /// changed run on the blocking pool; only the run itself is async.
    pub fn run_python<'f>(&'f self, tenant: &'f str, session_id: &'f str, request: RunRequest, base_url: &'f str) -> BoxFuture<'f, Result<RunReport, InterpreterError>> {
        self.run_python_live(tenant, session_id, request, base_url, None)
    }

    /// [`Self::run_python`], sending output and results to `live` as they
    /// are made (when given); the report holds them all again.
    pub fn run_python_live<'f>(
        &'f self,
        tenant: &'f str,
        session_id: &'f str,
        request: RunRequest,
        base_url: &'f str,
        sink: Option<LiveSink>,
    ) -> BoxFuture<'f, Result<RunReport, InterpreterError>> {
        Box::pin(async move {
            let interpreter = self.interpreter;
            let asked_env = request.env.clone();
            let env = checked_env(request.env)?;
            let run_id = match request.run_id {
                Some(given) => names::run_id(&given)?.to_owned(),
                None => uuid::Uuid::new_v4().simple().to_string(),
            };
            let create = Create::Yes { ttl: None, runtime: request.runtime };
            // A warm run finds its session in the table; only a new or reloaded
            // one needs the store, on the blocking pool.
            let (session, mut live) = interpreter.sessions().locked(tenant, session_id, create).await?;
            interpreter.hibernation().take_saved_state(&session, &mut live).await?;
            if session.image_is_live_state.swap(false, Relaxed) {
                // A quiet checkpoint kept the state this run is about to
                // change: the store's image is older from here on.
                let stored = session.clone();
                interpreter.off_workers(move |_| stored.store.remove_image(&stored.tenant, &stored.id)).await?;
            }
            let every_run = interpreter.config.checkpoint == crate::config::Checkpoint::EveryRun;
            let roll_back = every_run.then(|| crate::views::hibernation::Hibernation::roll_back_point(&session, &live));
            // File calls go on beside the run: what they change is not its doing.
            let generation = session.gate.run_started();
            let cached = session.seen.lock().unwrap_or_else(|p| p.into_inner()).take();
            let before = match cached {
                Some(before) => before,
                None => {
                    let scanned = session.clone();
                    interpreter.off_workers(move |_| Ok(picture(scanned.files.dir()))).await?
                }
            };
            // Armed under the run's lock: an interrupt stops this run, never a later one.
            let interrupt = Interrupt::new();
            *session.running.lock().unwrap_or_else(|p| p.into_inner()) = Some((run_id.clone(), interrupt.clone()));
            let cell = CellRequest {
                code: String::new(),
                env,
                limits: request.limits,
                figure_formats: request.figure_formats,
                result_data: request.result_data,
                live: sink,
                interrupt: Some(interrupt),
            };
            // Shell escapes and magics are IPython's: JavaScript's `!x` is a negation.
            let segments = if session.runtime.is_python() { cell_magics::segments(&request.code) } else { None };
            let cell = match segments {
                None => live.run(CellRequest { code: request.code, ..cell }).await,
                Some(segments) => {
                    let escapes = Escapes { tenant, session_id, env: asked_env };
                    match escapes.run(interpreter, &mut live, segments, cell).await {
                        Ok(cell) => cell,
                        Err(error) => {
                            *session.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
                            return Err(error);
                        }
                    }
                }
            };
            *session.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
            session.had_state.store(live.is_live(), Relaxed);
            if !every_run && interpreter.store.shared_records().is_none() {
                // Captures are rare here (hibernation, forks): the segments a
                // capture would reuse are not worth the memory they hold.
                live.forget_segments();
            }
            interpreter.measure_memory(&session, &mut live).await;
            let succeeded = cell.error.is_none();
            // The filesystem layer saw every change the code tried: when it saw
            // none, the directory is as the run found it, and nothing is walked.
            let untouched = succeeded && !live.files_touched();
            let (artifacts, artifact_errors) = if untouched && !session.meta_due() {
                session.touch();
                session.gate.keep_seen(&session.seen, generation, before);
                (Vec::new(), Vec::new())
            } else {
                let (kept, base_url) = (session.clone(), base_url.to_owned());
                // Kept while the run's lock is held, so the next run cannot change them first.
                interpreter
                    .off_workers(move |i| {
                        // Fail fast: after a failed run nothing is scanned or kept
                        // (and the next run walks the directory itself).
                        let changed_files = if untouched {
                            kept.gate.keep_seen(&kept.seen, generation, before);
                            Vec::new()
                        } else if succeeded {
                            let after = picture(kept.files.dir());
                            let mut found = changed(&before, &after);
                            found.retain(|file| after.get(&file.filename).is_none_or(|state| !kept.gate.written_outside(&file.filename, state)));
                            kept.gate.keep_seen(&kept.seen, generation, after);
                            found
                        } else {
                            Vec::new()
                        };
                        let artifacts = i.runs().keep(&kept, changed_files, &base_url);
                        kept.touch_and_keep();
                        Ok(artifacts)
                    })
                    .await?
            };
            if let Some(before) = roll_back
                && live.is_live()
            {
                // The answer waits for the image: a run it acknowledges outlives this host.
                interpreter.hibernation().checkpoint(&session, &mut live, before).await?;
            }
            drop(live);
            interpreter.hibernation().checkpoint_when_quiet(&session);
            interpreter.hibernation().evict_beyond_limit(&session).await;
            Ok(RunReport { run_id, session_id: session_id.to_owned(), runtime: session.runtime, cell, artifacts, artifact_errors })
        })
    }

    /// Stops the session's run in progress, if there is one; true when one
    /// was stopped. Touches no file: the async workers may call it.
    pub fn interrupt(&self, tenant: &str, session_id: &str) -> Result<bool, InterpreterError> {
        self.interrupt_matching(tenant, session_id, None)
    }

    /// Stops the session's run in progress when it is the run `run_id` (a
    /// run still waiting for the session is not stopped, nor one after it).
    pub fn interrupt_run(&self, tenant: &str, session_id: &str, run_id: &str) -> Result<bool, InterpreterError> {
        self.interrupt_matching(tenant, session_id, Some(run_id))
    }

    /// Asks the host that holds the session, when another host of the
    /// fleet does, to stop its run there (`run_id`'s only, when given):
    /// true when that host was asked. Blocking (it reaches the store).
    pub fn interrupt_elsewhere(&self, tenant: &str, session_id: &str, run_id: Option<&str>) -> Result<bool, InterpreterError> {
        let (tenant, session_id) = (names::tenant(tenant)?, names::session_id(session_id)?);
        self.interpreter.store.ask_interrupt(tenant, session_id, run_id)
    }

    /// The interrupts other hosts ask this one for (see
    /// [`Self::interrupt_elsewhere`]); `None` on a store of one host, or
    /// when taken before.
    pub fn interrupt_requests(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<crate::InterruptRequest>> {
        self.interpreter.store.interrupt_requests()
    }

    fn interrupt_matching(&self, tenant: &str, session_id: &str, run_id: Option<&str>) -> Result<bool, InterpreterError> {
        let key = (names::tenant(tenant)?.to_owned(), names::session_id(session_id)?.to_owned());
        let session = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        let Some(session) = session else {
            return Ok(false);
        };
        let running = session.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.as_ref() {
            Some((running_id, interrupt)) if run_id.is_none_or(|id| id == running_id) => {
                interrupt.interrupt();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Keeps each changed file as an artifact.
    fn keep(&self, session: &Session, files: Vec<FileInfo>, base_url: &str) -> (Vec<Artifact>, Vec<ArtifactFailure>) {
        let interpreter = self.interpreter;
        let mut kept = Vec::new();
        let (files, mut failed) = crate::stores::artifact_store::within_run_cap(files, interpreter.artifact_store.max_per_run());
        for file in files {
            let ingested = session
                .files
                .host_path(&file.filename)
                .and_then(|(_, path)| interpreter.artifact_store.ingest(&session.tenant, &session.id, &file.filename, &path, base_url));
            match ingested {
                Ok(artifact) => {
                    Stats::add(&interpreter.stats.artifacts_kept, 1);
                    Stats::add(&interpreter.stats.artifact_bytes_kept, artifact.size_bytes);
                    kept.push(artifact)
                }
                Err(e) => failed.push(ArtifactFailure { filename: file.filename, error: e.to_string() }),
            }
        }
        (kept, failed)
    }
}

/// The run's environment: names of letters, digits and `_`, bounded.
pub(crate) fn checked_env(env: BTreeMap<String, String>) -> Result<Vec<(String, String)>, InterpreterError> {
    if env.len() > MAX_ENV_VARS {
        return Err(InterpreterError::Invalid(format!("env holds more than {MAX_ENV_VARS} variables")));
    }
    env.into_iter()
        .map(|(name, value)| {
            let valid_name = !name.is_empty()
                && name.len() <= 128
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_name {
                return Err(InterpreterError::Invalid(format!("env name {name:?} must be letters, digits and '_'")));
            }
            if value.len() > MAX_ENV_VALUE_BYTES || value.contains('\0') {
                return Err(InterpreterError::Invalid(format!("env value of {name} is over {MAX_ENV_VALUE_BYTES} bytes or holds NUL")));
            }
            Ok((name, value))
        })
        .collect()
}

/// Size and modification time of every file, to tell what a run changed.
fn picture(dir: &Path) -> Picture {
    SessionFiles::new(dir.to_path_buf())
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| {
            let modified = std::fs::symlink_metadata(dir.join(&f.filename)).and_then(|m| m.modified()).ok()?;
            Some((f.filename, (f.size_bytes, modified)))
        })
        .collect()
}

/// The files of `after` that are new or differ from `before`, by name.
fn changed(before: &Picture, after: &Picture) -> Vec<FileInfo> {
    let mut found: Vec<FileInfo> = after
        .iter()
        .filter(|(name, seen)| before.get(*name) != Some(*seen))
        .map(|(name, (size, _))| crate::directory::session_files::info(name.clone(), *size))
        .collect();
    found.sort_by(|a, b| a.filename.cmp(&b.filename));
    found
}

/// Runs code in the session (created on first use), sending output and
/// results to `live` as they are made when given.
pub struct RunCode {
    /// The session to run in.
    pub session_id: String,
    /// The code and what it runs with.
    pub request: RunRequest,
    /// Where output goes while the run goes on (server-sent events, MCP progress).
    pub live: Option<LiveSink>,
}

impl Operation for RunCode {
    type Output = RunReport;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Run).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<RunReport, InterpreterError>> {
        let (tenant, base_url) = (caller.tenant.clone(), caller.base_url.clone());
        Box::pin(async move { interpreter.runs().run_python_live(&tenant, &self.session_id, self.request, &base_url, self.live).await })
    }

    fn run_request(&self) -> Option<&RunRequest> {
        Some(&self.request)
    }

    fn run_report(output: &RunReport) -> Option<&RunReport> {
        Some(output)
    }
}

#[cfg(test)]
mod send_check {
    use crate::operation::{CallContext, Operation};

    fn is_send<T: Send>(_: T) {}

    #[allow(dead_code)]
    fn run_python_is_send(i: &std::sync::Arc<crate::interpreter::Interpreter>) {
        is_send(i.runs().run_python("t", "s", super::RunRequest::default(), "http://h"));
        let caller = CallContext { tenant: "t".to_owned(), base_url: "http://h".to_owned() };
        is_send(super::RunCode { session_id: "s".to_owned(), request: super::RunRequest::default(), live: None }.call(i.clone(), &caller));
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::interpreter;

    /// A run reports the files it changed and no others: the directory as
    /// the last run left it is reused only until an upload or a delete
    /// changes it between runs.
    #[test]
    fn files_changed_between_runs_are_not_the_next_runs_artifacts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        let run = |code: &str| {
            let report = runtime.block_on(interpreter.runs().run_python("t", "s", super::RunRequest::code(code), "http://h")).expect("run");
            assert_eq!(report.cell.error, None, "{code}");
            report.artifacts.into_iter().map(|a| a.filename).collect::<Vec<_>>()
        };
        assert_eq!(run("open('a.txt', 'w').write('one')"), ["a.txt"]);
        assert!(run("x = 1").is_empty(), "a run that touches nothing lists nothing");
        interpreter.files().upload("t", "s", "b.txt", b"uploaded", false, None).expect("upload");
        assert!(run("x = 2").is_empty(), "the upload is not the run's change");
        interpreter.files().delete("t", "s", "a.txt").expect("delete");
        assert_eq!(run("open('a.txt', 'w').write('one')"), ["a.txt"], "a file the run made again after a delete is its change");
        assert_eq!(run("open('b.txt', 'w').write('changed by the run')"), ["b.txt"]);
    }
}
