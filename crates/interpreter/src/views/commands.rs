//! Commands: a command line run by the shell runtime on a session's tree
//! (created on first use), beside its runs. A command is a process of its
//! own, as on a machine: it does not wait for a cell, a cell does not wait
//! for it, and it never touches the session's live Python state; what it
//! writes is seen by the next cell (and by the quota) as a file call's
//! writes are.

use std::sync::Arc;
use std::time::Instant;

use anypath_sandbox::shell::{Collected, CommandTree, NodeHost, OutputSink, PythonHost, ShellCommand, ShellRuntime, StdinFeed};
use anypath_sandbox::layout::SANDBOX_HOME;
use anypath_sandbox::{FilesLayout, Interrupt, LimitOverrides};
use anypath_wire::{CommandReport, CommandRequest, Runtime};
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::Create;
use crate::interpreter::Interpreter;
use crate::operation::{CallContext, Described, Operation, OperationKind};

/// Commands one session may run at once: each is an instance with its own
/// memory, so a loop starting background commands without end is refused
/// here, with the session still working, before it takes the host's memory.
pub const MAX_COMMANDS_AT_ONCE: usize = 8;

/// A command's place among its session's running ones, given back when dropped.
struct CommandSlot<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> CommandSlot<'a> {
    fn take(running: &'a std::sync::atomic::AtomicUsize, session_id: &str) -> Result<Self, InterpreterError> {
        use std::sync::atomic::Ordering::AcqRel;
        running
            .fetch_update(AcqRel, std::sync::atomic::Ordering::Acquire, |now| (now < MAX_COMMANDS_AT_ONCE).then_some(now + 1))
            .map(|_| Self(running))
            .map_err(|_| InterpreterError::TooManyCommands(session_id.to_owned(), MAX_COMMANDS_AT_ONCE))
    }
}

impl Drop for CommandSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// `PATH` as a Linux user's shell has it (the shell finds its utilities by name).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The interpreter's commands: see [`Interpreter::commands`].
pub struct Commands<'a> {
    interpreter: &'a Arc<Interpreter>,
}

/// How a command's streams reach its caller while it runs; all optional (a
/// JSON answer needs none of them).
#[derive(Default)]
pub struct CommandStreams {
    /// Where stdout and stderr go as they are written; the report holds
    /// them too.
    pub output: Option<OutputSink>,
    /// Its stdin, fed while it runs (E2B's `send_stdin`); the request's
    /// `stdin` is used when there is none.
    pub stdin: Option<StdinFeed>,
    /// Stops it when raised (a kill).
    pub interrupt: Option<Interrupt>,
}

impl Interpreter {
    /// Running command lines in sessions' shells.
    pub fn commands(self: &Arc<Self>) -> Commands<'_> {
        Commands { interpreter: self }
    }

    /// Runs commands on `shell` (`/v1`'s commands, E2B's `commands.run`,
    /// `!cmd` lines); without it, a command is refused as unavailable.
    pub fn with_shell(mut self, shell: ShellRuntime) -> Self {
        self.shell = Some(shell);
        self
    }

    /// Lets `pip` in commands install from `dir`, a folder of wheels the
    /// sandbox sees read-only at `/wheelhouse` (in a `pip` command only).
    pub fn with_wheelhouse(mut self, dir: std::path::PathBuf) -> Self {
        self.wheelhouse = Some(dir);
        self
    }

    /// Whether this interpreter runs commands.
    pub fn has_shell(&self) -> bool {
        self.shell.is_some()
    }
}

impl Commands<'_> {
    /// Runs `request` in the session's tree (creating the session on first
    /// use) and answers when it has ended, with its output, exit code and
    /// the limit that stopped it, if one did.
    pub fn run<'f>(&'f self, tenant: &'f str, session_id: &'f str, request: CommandRequest, streams: CommandStreams) -> BoxFuture<'f, Result<CommandReport, InterpreterError>> {
        Box::pin(async move {
            let interpreter = self.interpreter;
            let shell = interpreter.shell.clone().ok_or(InterpreterError::ShellUnavailable)?;
            let user = match request.user.as_deref() {
                None | Some("user") => "user",
                Some("root") => "root",
                Some(other) => return Err(InterpreterError::Invalid(format!("user {other:?} is not one of this sandbox's users (user, root)"))),
            };
            let limits = shell.limits();
            if request.command.trim().is_empty() {
                return Err(InterpreterError::Invalid("command is empty".into()));
            }
            if request.command.len() as u64 > limits.max_code_bytes || request.command.contains('\0') {
                return Err(InterpreterError::Invalid(format!("command is over {} bytes or holds NUL", limits.max_code_bytes)));
            }
            let extra_env = crate::views::runs::checked_env(request.env)?;
            let session = match interpreter.sessions().listed(tenant, session_id, &Create::Yes { ttl: None, runtime: None })? {
                Some(session) => session,
                None => {
                    let (owner, id) = (tenant.to_owned(), session_id.to_owned());
                    interpreter.off_workers(move |i| i.sessions().get(&owner, &id, Create::Yes { ttl: None, runtime: None })).await?
                }
            };
            let home = match (session.layout, user) {
                (FilesLayout::Root, "root") => anypath_sandbox::layout::ROOT_HOME,
                (FilesLayout::Root, _) => SANDBOX_HOME,
                (FilesLayout::MntData, _) => anypath_sandbox::SESSION_DIR,
            };
            let cwd = request.cwd.filter(|cwd| !cwd.is_empty()).unwrap_or_else(|| home.to_owned());
            if !cwd.starts_with('/') || cwd.contains('\0') {
                return Err(InterpreterError::Invalid(format!("cwd {cwd:?} must be an absolute path")));
            }
            let mut env: Vec<(String, String)> = [("HOME", home), ("USER", user), ("LOGNAME", user), ("PATH", PATH), ("PWD", cwd.as_str()), ("LANG", "C.UTF-8"), ("SHELL", "/bin/bash")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            for (name, value) in extra_env {
                env.retain(|(k, _)| *k != name);
                env.push((name, value));
            }
            // `python` in a command runs the session's Python; a JavaScript
            // session's commands get the richest Python the host offers.
            let runtime = match session.runtime {
                runtime if runtime.is_python() => interpreter.sandbox_for(runtime)?.clone(),
                _ => [Runtime::PythonData, Runtime::Python].into_iter().find_map(|r| interpreter.sandbox_for(r).ok()).ok_or(InterpreterError::RuntimeUnavailable(Runtime::Python))?.clone(),
            };
            let tree = CommandTree { dir: session.files.dir().to_path_buf(), layout: session.layout, datasets: Some(session.datasets_view.clone()), quota: Some(interpreter.config.quota) };
            let python = PythonHost { runtime, dir: tree.dir.clone(), layout: tree.layout, datasets: tree.datasets.clone(), quota: tree.quota, limits: LimitOverrides::default(), wheelhouse: interpreter.wheelhouse.clone() };
            // `node` starts the same way on the JavaScript runtime (no wheelhouse).
            let node = interpreter.sandbox_for(Runtime::Javascript).ok().map(|runtime| NodeHost { runtime: runtime.clone(), wheelhouse: None, ..python.clone() });
            // Kept for the report (the shell caps each stream before it gets here) and passed on.
            let kept = Collected::default();
            let output = kept.sink_then(streams.output);
            let stdin = streams.stdin.or_else(|| request.stdin.map(|text| StdinFeed::closed_with(text.as_bytes())));
            let command = ShellCommand {
                script: request.command,
                cwd,
                env,
                tree,
                stdin,
                output,
                limits: LimitOverrides { timeout_ms: request.timeout_ms, ..LimitOverrides::default() },
                interrupt: streams.interrupt,
                python: Some(python),
                node,
            };
            let slot = CommandSlot::take(&session.commands_running, session_id)?;
            let started = Instant::now();
            // A hand-over of the session waits for the command, as for a file call.
            let hold = session.gate.enter_async().await;
            let exit = shell.run(command).await;
            drop(hold);
            drop(slot);
            session.gate.changed(&session.seen, None);
            session.touch();
            let (stdout, stderr) = kept.text();
            Ok(CommandReport {
                session_id: session_id.to_owned(),
                exit_code: exit.exit_code,
                stdout,
                stdout_truncated: exit.stdout_truncated,
                stderr,
                stderr_truncated: exit.stderr_truncated,
                error: exit.error,
                duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            })
        })
    }
}

/// Runs a command line in the session (created on first use).
pub struct RunCommand {
    /// The session whose tree it runs on.
    pub session_id: String,
    pub request: CommandRequest,
    pub streams: CommandStreams,
}

impl Operation for RunCommand {
    type Output = CommandReport;

    fn describe(&self) -> Described {
        // The audit line names the program, not its arguments (which may hold secrets).
        let program: String = self.request.command.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || "._-/".contains(*c)).take(64).collect();
        Described::new(OperationKind::Command).session(&self.session_id).subject(&program)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<CommandReport, InterpreterError>> {
        let tenant = caller.tenant.clone();
        Box::pin(async move { interpreter.commands().run(&tenant, &self.session_id, self.request, self.streams).await })
    }

    fn command_env(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        Some(&self.request.env)
    }
}
