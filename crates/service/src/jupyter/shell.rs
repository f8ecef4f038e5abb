//! The shell requests a kernel answers: `execute_request` run in the
//! kernel's session with its output on iopub as it happens, and the
//! introspection requests (`complete`, `inspect`, `is_complete`) answered
//! from the session's own namespace by a short helper run. A `bash`
//! kernel's cell runs as a `%%bash` cell; it has no namespace to introspect.

use std::collections::BTreeMap;
use std::sync::Arc;

use anypath_interpreter::{RunRequest, runs};
use anypath_wire::{CellResult, LiveEvent, ResultOrigin};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::Jupyter;
use super::kernels::Kernel;
use super::specs::Language;
use super::message::{Incoming, PROTOCOL_VERSION};
use crate::cell_text::{Failure, dedent};
use crate::interpreter_service::{Caller, ServiceError};
use crate::live_run::{Lined, Lines};

/// Marks the line a helper run prints its answer on.
const HELPER_MARK: &str = "\u{1e}anypath-helper ";
/// The most completions one request gets.
const MAX_COMPLETIONS: usize = 200;

/// `execute_request`.
#[derive(Debug, Deserialize)]
#[serde(default)]
struct Execute {
    code: String,
    silent: bool,
    store_history: bool,
    user_expressions: BTreeMap<String, String>,
    stop_on_error: bool,
}

impl Default for Execute {
    fn default() -> Self {
        Self { code: String::new(), silent: false, store_history: true, user_expressions: BTreeMap::new(), stop_on_error: true }
    }
}

/// `complete_request` and `inspect_request`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AtCursor {
    code: String,
    cursor_pos: Option<usize>,
}

/// `is_complete_request`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct IsComplete {
    code: String,
}

/// The reply type of a request type.
pub(crate) fn reply_type(request_type: &str) -> String {
    match request_type.strip_suffix("_request") {
        Some(stem) => format!("{stem}_reply"),
        None => format!("{request_type}_reply"),
    }
}

/// Runs `handle` between iopub `busy` and `idle` for `request`.
pub(crate) fn around<T>(kernel: &Kernel, request: &Incoming, handle: impl FnOnce() -> T) -> T {
    let parent = request.parent_header();
    kernel.publish(kernel.sender().frame("status", "iopub", &parent, &json!({ "execution_state": "busy" })));
    let answered = handle();
    kernel.publish(kernel.sender().frame("status", "iopub", &parent, &json!({ "execution_state": "idle" })));
    answered
}

/// Serves one socket's queued requests in order, one cell of the kernel at a time.
pub(crate) async fn work(jupyter: Arc<Jupyter>, caller: Caller, kernel: Arc<Kernel>, mut queued: mpsc::UnboundedReceiver<(u64, Incoming)>, replies: mpsc::UnboundedSender<String>) {
    while let Some((ticket, request)) = queued.recv().await {
        let _turn = kernel.queue.lock().await;
        let shell = Shell { jupyter: &jupyter, caller: caller.next_request(), kernel: &kernel, request: &request, replies: &replies, parent: request.parent_header() };
        shell.publish("status", json!({ "execution_state": "busy" }));
        // A kernel shut down runs nothing more: its session is on its way out.
        let content = if kernel.aborted(ticket) || kernel.is_gone() {
            json!({ "status": "aborted" })
        } else {
            match request.msg_type() {
                "execute_request" => shell.execute().await,
                "complete_request" => shell.complete().await,
                "inspect_request" => shell.inspect().await,
                _ => shell.is_complete().await,
            }
        };
        shell.reply(content);
        shell.publish("status", json!({ "execution_state": "idle" }));
    }
}

/// One request being answered.
struct Shell<'a> {
    jupyter: &'a Jupyter,
    caller: Caller,
    kernel: &'a Kernel,
    request: &'a Incoming,
    replies: &'a mpsc::UnboundedSender<String>,
    parent: Map<String, Value>,
}

impl Shell<'_> {
    fn publish(&self, msg_type: &str, content: Value) {
        self.kernel.publish(self.kernel.sender().frame(msg_type, "iopub", &self.parent, &content));
    }

    fn reply(&self, content: Value) {
        let kind = reply_type(self.request.msg_type());
        let _ = self.replies.send(self.kernel.sender().frame(&kind, self.request.channel(), &self.parent, &content));
    }

    /// Runs the cell, its output published as it happens.
    async fn execute(&self) -> Value {
        let asked: Execute = match self.request.content() {
            Ok(asked) => asked,
            Err(e) => return error_reply(0, &Failure { name: "ValueError".into(), value: format!("the execute_request is unreadable: {e}"), traceback: String::new() }),
        };
        let counted = asked.store_history && !asked.silent;
        let count = {
            let mut activity = self.kernel.activity();
            activity.busy = true;
            if counted {
                activity.execution_count += 1;
                let (session, line) = (activity.sender.session.clone(), activity.execution_count);
                activity.history.push((session, line, asked.code.clone()));
            }
            activity.execution_count
        };
        if !asked.silent {
            self.publish("execute_input", json!({ "code": asked.code, "execution_count": count }));
        }
        let ran = self.run_live(&asked, count).await;
        let content = match ran {
            Ok(None) => {
                let user_expressions = if asked.user_expressions.is_empty() { Value::Object(Map::new()) } else { self.user_expressions(&asked.user_expressions).await };
                json!({ "status": "ok", "execution_count": count, "user_expressions": user_expressions, "payload": [] })
            }
            Ok(Some(failure)) | Err(failure) => {
                if !asked.silent {
                    self.publish("error", json!({ "ename": failure.name, "evalue": failure.value, "traceback": traceback_lines(&failure) }));
                }
                if asked.stop_on_error {
                    self.kernel.abort_queued();
                }
                error_reply(count, &failure)
            }
        };
        self.kernel.activity().busy = false;
        content
    }

    /// The run with its events published; the failure it ended with, if any.
    async fn run_live(&self, asked: &Execute, count: u64) -> Result<Option<Failure>, Failure> {
        self.jupyter.keep_kernel_files(&self.caller).await;
        let code = match self.language() {
            Language::Python => dedent(&asked.code),
            Language::Bash => format!("%%bash\n{}", asked.code),
            Language::Javascript => asked.code.clone(),
        };
        let request = RunRequest { code, env: self.kernel.record.env.clone(), ..RunRequest::default() };
        let mut run = self.jupyter.service.start_live(self.caller.clone(), self.kernel.record.session_id.clone(), request, true);
        let mut lines = Lines::default();
        while let Some(lined) = lines.next(&mut run, None).await {
            let Lined::Send(events) = lined else { continue };
            if asked.silent {
                continue;
            }
            for event in &events {
                match event {
                    LiveEvent::Stdout(text) => self.publish("stream", json!({ "name": "stdout", "text": text })),
                    LiveEvent::Stderr(text) => self.publish("stream", json!({ "name": "stderr", "text": text })),
                    LiveEvent::Result(result) => self.publish_result(result, count),
                }
            }
        }
        let report = run.outcome().await.map_err(|error| service_failure(&error))?;
        if report.cell.state_reset
            && let Some(note) = &report.cell.state_note
        {
            self.publish("stream", json!({ "name": "stderr", "text": format!("The kernel's variables were reset: {note}\n") }));
        }
        Ok(report.cell.error.as_ref().map(|error| Failure::of(error, report.cell.traceback.as_deref())))
    }

    fn publish_result(&self, result: &CellResult, count: u64) {
        let data = mime_bundle(result);
        if result.origin == ResultOrigin::Value {
            self.publish("execute_result", json!({ "execution_count": count, "data": data, "metadata": {} }));
        } else {
            self.publish("display_data", json!({ "data": data, "metadata": {}, "transient": {} }));
        }
    }

    /// Each user expression's value after the cell, or its error.
    async fn user_expressions(&self, expressions: &BTreeMap<String, String>) -> Value {
        // The helper is Python: another language's expressions are not evaluated.
        let answered = if self.language() == Language::Python { self.helper(USER_EXPRESSIONS, &json!(expressions)).await } else { None };
        answered.unwrap_or_else(|| {
            let failed = json!({ "status": "error", "ename": "RuntimeError", "evalue": "the expressions could not be evaluated", "traceback": [] });
            Value::Object(expressions.keys().map(|k| (k.clone(), failed.clone())).collect())
        })
    }

    fn language(&self) -> Language {
        self.jupyter.language(&self.kernel.record.spec)
    }

    /// Completions of the name before the cursor, from the session's namespace.
    async fn complete(&self) -> Value {
        let asked: AtCursor = self.request.content().unwrap_or_default();
        let cursor = asked.cursor_pos.unwrap_or_else(|| asked.code.chars().count());
        let (start, token) = name_before(&asked.code, cursor);
        let matches = if token.is_empty() || self.language() != Language::Python { None } else { self.helper(COMPLETE, &json!({ "text": token, "max": MAX_COMPLETIONS })).await };
        json!({ "status": "ok", "matches": matches.unwrap_or_else(|| json!([])), "cursor_start": start, "cursor_end": cursor, "metadata": {} })
    }

    /// What the name at the cursor is, from the session's namespace.
    async fn inspect(&self) -> Value {
        let asked: AtCursor = self.request.content().unwrap_or_default();
        let cursor = asked.cursor_pos.unwrap_or_else(|| asked.code.chars().count());
        let name = name_around(&asked.code, cursor);
        let found = if name.is_empty() || self.language() != Language::Python { None } else { self.helper(INSPECT, &json!(name)).await };
        match found.as_ref().and_then(Value::as_str) {
            Some(text) => json!({ "status": "ok", "found": true, "data": { "text/plain": text }, "metadata": {} }),
            None => json!({ "status": "ok", "found": false, "data": {}, "metadata": {} }),
        }
    }

    /// Whether the code is a whole cell, as Python's own compiler reads it.
    async fn is_complete(&self) -> Value {
        let asked: IsComplete = self.request.content().unwrap_or_default();
        if self.language() == Language::Bash {
            // A shell line ending in `\` goes on, as bash reads it.
            let incomplete = asked.code.trim_end_matches('\n').ends_with('\\');
            return if incomplete { json!({ "status": "incomplete", "indent": "" }) } else { json!({ "status": "complete" }) };
        }
        if self.language() == Language::Javascript {
            // No parse of the code outside a run: the front end decides.
            return json!({ "status": "unknown" });
        }
        let status = self.helper(IS_COMPLETE, &json!(asked.code)).await;
        match status.as_ref().and_then(Value::as_str) {
            Some("incomplete") => json!({ "status": "incomplete", "indent": next_indent(&asked.code) }),
            Some(status @ ("complete" | "invalid")) => json!({ "status": status }),
            _ => json!({ "status": "unknown" }),
        }
    }

    /// Runs a helper in the session's namespace without adding to it: the
    /// helper sees the namespace as `ns` and `argument` as `arg`, and prints
    /// its answer as JSON after [`HELPER_MARK`]. None when it could not run.
    async fn helper(&self, source: &str, argument: &Value) -> Option<Value> {
        let code = helper_code(source, argument);
        let run = RunRequest { code, ..RunRequest::default() };
        let report = self.jupyter.service.call(&self.caller, runs::RunCode { session_id: self.kernel.record.session_id.clone(), request: run, live: None }).await.ok()?;
        helper_answer(&report.cell.output.stdout)
    }
}

/// The code of a helper run: `source` executed in a scope of its own.
fn helper_code(source: &str, argument: &Value) -> String {
    // A JSON string is a Python string literal too.
    let source = Value::String(source.to_owned()).to_string();
    let argument = Value::String(argument.to_string()).to_string();
    format!("exec({source}, {{'ns': globals(), 'arg': __import__('json').loads({argument}), 'MARK': {mark}}})", mark = Value::String(HELPER_MARK.to_owned()))
}

/// The answer a helper printed.
fn helper_answer(stdout: &str) -> Option<Value> {
    let line = stdout.lines().rev().find_map(|line| line.strip_prefix(HELPER_MARK))?;
    serde_json::from_str(line).ok()
}

// Python's own rlcompleter is not in the standard-library runtime: the
// same rules, names of the namespace, builtins and keywords, or the
// attributes of the object before the last dot.
const COMPLETE: &str = r#"
import json, builtins
text = arg['text']
base, dot, prefix = text.rpartition('.')
if dot:
    try:
        found = [base + '.' + name for name in dir(eval(base, ns)) if name.startswith(prefix)]
    except Exception:
        found = []
else:
    pool = set(ns) | set(dir(builtins))
    try:
        import keyword
        pool |= set(keyword.kwlist)
    except ImportError:
        pass
    found = [name for name in pool if name.startswith(text)]
if not prefix.startswith('_'):
    found = [name for name in found if not name.rpartition('.')[2].startswith('_')]
print(MARK + json.dumps(sorted(set(found))[:arg['max']]))
"#;

const INSPECT: &str = r#"
import json, inspect
text = None
try:
    obj = eval(arg, ns)
    parts = ['Type: ' + type(obj).__name__]
    try:
        parts.append('String form: ' + repr(obj)[:1000])
    except Exception:
        pass
    try:
        parts.append('Signature: ' + arg + str(inspect.signature(obj)))
    except Exception:
        pass
    doc = inspect.getdoc(obj)
    if doc:
        parts.append('Docstring:\n' + doc)
    text = '\n'.join(parts)
except Exception:
    pass
print(MARK + json.dumps(text))
"#;

const IS_COMPLETE: &str = r#"
import json, codeop
try:
    status = 'complete' if codeop.compile_command(arg, '<cell>', 'exec') is not None else 'incomplete'
except (SyntaxError, OverflowError, ValueError):
    status = 'invalid'
print(MARK + json.dumps(status))
"#;

const USER_EXPRESSIONS: &str = r#"
import json
answers = {}
for key, expression in arg.items():
    try:
        answers[key] = {'status': 'ok', 'data': {'text/plain': repr(eval(expression, ns))}, 'metadata': {}}
    except Exception as error:
        answers[key] = {'status': 'error', 'ename': type(error).__name__, 'evalue': str(error), 'traceback': []}
print(MARK + json.dumps(answers))
"#;

/// The Python version a kernel's runtime reports.
pub(crate) const PYTHON_VERSION: &str = r#"
import json, sys
print(MARK + json.dumps('.'.join(str(part) for part in sys.version_info[:3])))
"#;

/// A run's result as a Jupyter MIME bundle: JSON forms as JSON, anypath's own forms left out.
fn mime_bundle(result: &CellResult) -> Map<String, Value> {
    result
        .mime
        .iter()
        .filter(|(mime, _)| !mime.starts_with("application/vnd.anypath."))
        .map(|(mime, value)| {
            let value = if mime == "application/json" { serde_json::from_str(value).unwrap_or(Value::Null) } else { Value::String(value.clone()) };
            (mime.clone(), value)
        })
        .collect()
}

fn traceback_lines(failure: &Failure) -> Vec<String> {
    let mut lines: Vec<String> = failure.traceback.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        lines.push(format!("{}: {}", failure.name, failure.value));
    }
    lines
}

fn error_reply(count: u64, failure: &Failure) -> Value {
    json!({ "status": "error", "execution_count": count, "ename": failure.name, "evalue": failure.value, "traceback": traceback_lines(failure) })
}

/// A run that never started (refused, busy, gone) as the cell's error.
fn service_failure(error: &ServiceError) -> Failure {
    Failure { name: "SandboxError".into(), value: error.to_string(), traceback: String::new() }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.'
}

/// The dotted name ending at `cursor` (in characters) and where it starts.
fn name_before(code: &str, cursor: usize) -> (usize, String) {
    let before: Vec<char> = code.chars().take(cursor).collect();
    let start = before.iter().rposition(|c| !is_name_char(*c)).map_or(0, |p| p + 1);
    (start, before[start..].iter().collect())
}

/// The dotted name the cursor is in, or just after; empty when none.
fn name_around(code: &str, cursor: usize) -> String {
    let chars: Vec<char> = code.chars().collect();
    let cursor = cursor.min(chars.len());
    let start = chars[..cursor].iter().rposition(|c| !is_name_char(*c)).map_or(0, |p| p + 1);
    let end = chars[cursor..].iter().position(|c| !is_name_char(*c)).map_or(chars.len(), |p| cursor + p);
    let name: String = chars[start..end].iter().collect::<String>().trim_matches('.').to_owned();
    let valid = name.split('.').all(|part| part.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'));
    if valid { name } else { String::new() }
}

/// The indent the next line of an incomplete cell takes.
fn next_indent(code: &str) -> String {
    let last = code.lines().last().unwrap_or("");
    let indent = &last[..last.len() - last.trim_start().len()];
    if last.trim_end().ends_with(':') { format!("{indent}    ") } else { indent.to_owned() }
}

/// `kernel_info_reply`.
pub(crate) fn kernel_info(jupyter: &Jupyter, kernel: &Kernel) -> Value {
    let (language_info, banner) = match jupyter.language(&kernel.record.spec) {
        Language::Bash => (
            json!({ "name": "bash", "version": "5", "mimetype": "text/x-sh", "file_extension": ".sh", "pygments_lexer": "bash", "codemirror_mode": "shell" }),
            "bash (bashkit) in a WebAssembly sandbox (anypath): each cell is a script on the session's files".to_owned(),
        ),
        Language::Javascript => (
            json!({ "name": "javascript", "version": "ES2023", "mimetype": "application/javascript", "file_extension": ".js", "pygments_lexer": "javascript", "codemirror_mode": "javascript" }),
            "JavaScript (QuickJS) in a WebAssembly sandbox (anypath): top-level declarations persist from cell to cell".to_owned(),
        ),
        Language::Python => {
            let version = jupyter.python_version(&kernel.record.spec).unwrap_or_else(|| "3".to_owned());
            let banner = format!("Python {version} in a WebAssembly sandbox (anypath, kernelspec {})", kernel.record.spec);
            let info = json!({
                "name": "python",
                "version": version,
                "mimetype": "text/x-python",
                "file_extension": ".py",
                "pygments_lexer": "ipython3",
                "codemirror_mode": { "name": "ipython", "version": 3 },
                "nbconvert_exporter": "python",
            });
            (info, banner)
        }
    };
    json!({
        "status": "ok",
        "protocol_version": PROTOCOL_VERSION,
        "implementation": "anypath",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": language_info,
        "banner": banner,
        "help_links": [],
        "debugger": false,
    })
}

/// Asks a fresh kernel's runtime for its Python version.
pub(crate) async fn ask_python_version(jupyter: &Jupyter, caller: &Caller, session_id: &str) -> Option<String> {
    let run = RunRequest { code: helper_code(PYTHON_VERSION, &Value::Null), ..RunRequest::default() };
    let report = jupyter.service.call(caller, runs::RunCode { session_id: session_id.to_owned(), request: run, live: None }).await.ok()?;
    helper_answer(&report.cell.output.stdout).and_then(|v| v.as_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_at_the_cursor() {
        assert_eq!(name_before("x = df.hea", 10), (4, "df.hea".to_owned()));
        assert_eq!(name_before("print(", 6), (6, String::new()));
        assert_eq!(name_around("len(df.shape)", 8), "df.shape");
        assert_eq!(name_around("1.5", 1), "", "a number is no name");
    }

    #[test]
    fn helpers_answer_after_their_mark() {
        let printed = format!("noise\n{HELPER_MARK}[\"a\", \"b\"]\n");
        assert_eq!(helper_answer(&printed), Some(json!(["a", "b"])));
        assert_eq!(helper_answer("nothing"), None);
        let code = helper_code("print(1)", &json!({"t": "a'b\"c"}));
        assert!(code.starts_with("exec(\"print(1)\", {'ns': globals(), 'arg': __import__('json').loads("), "{code}");
    }

    #[test]
    fn replies_and_indents() {
        assert_eq!(reply_type("execute_request"), "execute_reply");
        assert_eq!(next_indent("for i in x:"), "    ");
        assert_eq!(next_indent("    y = 1"), "    ");
    }
}
