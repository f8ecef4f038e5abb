//! The tools a model may call, each against one sandbox session:
//! `write_file`, `read_file`, `list_files`, `run_python` and `run_tests`,
//! and `final_answer`, which ends the run with the model's answer.
//! A call the model gets wrong (unknown tool, malformed arguments, a path
//! leaving the session directory) is answered with a tool error it can read,
//! showing the smallest correct call, and touches nothing.

use anypath_llm::{ToolCall, ToolSpec};
use serde_json::{Value, json};

/// The only command `run_tests` runs: `python -m unittest discover` in the
/// session directory, as code, since a sandbox has no processes. Modules
/// loaded from the session directory, and their bytecode (a fix of the same
/// size in the same second would pass its check), are forgotten first, so
/// the tests see the files as they are now, as a fresh `python -m unittest` would.
pub const RUN_TESTS_CODE: &str = "import os, shutil, sys, unittest\n\
here = os.path.realpath('.') + os.sep\n\
for name, module in list(sys.modules.items()):\n    \
if os.path.realpath(getattr(module, '__file__', None) or '/').startswith(here):\n        \
del sys.modules[name]\n\
sys.path_importer_cache.clear()\n\
sys.dont_write_bytecode = True\n\
shutil.rmtree('__pycache__', ignore_errors=True)\n\
suite = unittest.defaultTestLoader.discover('.')\n\
result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)\n\
print('OK' if result.wasSuccessful() else 'FAILED', f'({result.testsRun} tests)')\n";

/// The session a run's tools act on.
pub trait Workspace {
    /// Writes (or replaces) a file of the session directory.
    fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure>;
    /// A file's text.
    fn read_file(&mut self, path: &str) -> Result<String, ToolFailure>;
    /// The session's files, one per line.
    fn list_files(&mut self) -> Result<String, ToolFailure>;
    /// Runs code in the session; stdout, stderr and the error, as text.
    fn run_python(&mut self, code: &str) -> Result<String, ToolFailure>;
}

/// A tool call that failed; the model sees the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub String);

/// The tool that ends a run: its `text` is the run's answer.
pub const FINAL_ANSWER: &str = "final_answer";

/// Every tool's name, in the order the model is told of them.
pub const NAMES: [&str; 6] = ["write_file", "read_file", "list_files", "run_python", "run_tests", FINAL_ANSWER];

/// Argument names small models use for a tool's `filePath`.
const PATH_ALIASES: [&str; 5] = ["filePath", "path", "file_path", "filename", "file"];

/// The tools, as the model is told of them.
pub fn specs() -> Vec<ToolSpec> {
    let path = json!({"type": "string", "description": "A file name in the session directory, e.g. hello.txt"});
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec { name: name.into(), description: description.into(), parameters };
    let no_arguments = json!({"type": "object", "properties": {}, "additionalProperties": false});
    vec![
        spec(
            "write_file",
            "Create or replace a file in the sandbox session directory.",
            json!({"type": "object", "properties": {"filePath": path, "content": {"type": "string"}}, "required": ["filePath", "content"], "additionalProperties": false}),
        ),
        spec(
            "read_file",
            "Read a text file from the sandbox session directory.",
            json!({"type": "object", "properties": {"filePath": path}, "required": ["filePath"], "additionalProperties": false}),
        ),
        spec("list_files", "List the files in the sandbox session directory.", no_arguments.clone()),
        spec(
            "run_python",
            "Run Python 3 code in the sandbox session as a notebook cell (state persists between calls; no network). Returns stdout, stderr, the value of a last expression, figures shown with plt.show(), and any error.",
            json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"], "additionalProperties": false}),
        ),
        spec("run_tests", "Run the session's tests: python -m unittest discover in the session directory.", no_arguments),
        spec(
            FINAL_ANSWER,
            "Finish the task: call this once the work is done (or cannot be done), with a short summary of what was done.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}),
        ),
    ]
}

/// Runs one call; the observation the model gets, and whether it is an error.
pub fn dispatch(call: &ToolCall, workspace: &mut dyn Workspace) -> (String, bool) {
    match execute(call, workspace) {
        Ok(observation) => (observation, false),
        Err(failure) => (format!("error: {failure}"), true),
    }
}

fn execute(call: &ToolCall, workspace: &mut dyn Workspace) -> Result<String, ToolFailure> {
    let Some(arguments) = call.arguments.as_object() else {
        let shown = example(&call.name);
        return Err(ToolFailure(format!("the arguments of {} are not a JSON object: {}; call it like this: {shown}", call.name, call.arguments)));
    };
    let text = |name: &str| -> Result<&str, ToolFailure> {
        arguments.get(name).and_then(Value::as_str).ok_or_else(|| missing(&call.name, name))
    };
    let path = || -> Result<String, ToolFailure> {
        let given = PATH_ALIASES.iter().find_map(|alias| arguments.get(*alias).and_then(Value::as_str));
        session_path(given.ok_or_else(|| missing(&call.name, "filePath"))?)
    };
    match call.name.as_str() {
        "write_file" => workspace.write_file(&path()?, text("content")?),
        "read_file" => workspace.read_file(&path()?),
        "list_files" => workspace.list_files(),
        "run_python" => workspace.run_python(text("code")?),
        "run_tests" => workspace.run_python(RUN_TESTS_CODE),
        FINAL_ANSWER => text("text").map(str::to_owned),
        other => Err(ToolFailure(format!("unknown tool {other:?}; the tools are {}", NAMES.join(", ")))),
    }
}

/// The refusal of a call that lacks `argument`, with the smallest correct call.
fn missing(tool: &str, argument: &str) -> ToolFailure {
    ToolFailure(format!("{tool} needs a string argument {argument:?}; call it like this: {}", example(tool)))
}

/// The smallest correct call of `tool`, as the model would write it.
pub fn example(tool: &str) -> &'static str {
    match tool {
        "write_file" => r#"{"name": "write_file", "arguments": {"filePath": "hello.txt", "content": "Hello"}}"#,
        "read_file" => r#"{"name": "read_file", "arguments": {"filePath": "hello.txt"}}"#,
        "run_python" => r#"{"name": "run_python", "arguments": {"code": "print(1 + 1)"}}"#,
        "run_tests" => r#"{"name": "run_tests", "arguments": {}}"#,
        "list_files" => r#"{"name": "list_files", "arguments": {}}"#,
        _ => r#"{"name": "final_answer", "arguments": {"text": "Wrote hello.txt."}}"#,
    }
}

/// The file a model names, relative to the session directory: a plain name
/// (`/mnt/data/` may prefix it). Anything that would leave the directory,
/// or name a directory, is refused before any call is made.
pub fn session_path(path: &str) -> Result<String, ToolFailure> {
    let escapes = || ToolFailure(format!("path escapes the sandbox: {path}"));
    let relative = path.strip_prefix("/mnt/data/").unwrap_or(path);
    let relative = relative.strip_prefix("./").unwrap_or(relative);
    if relative.is_empty() || relative.starts_with('/') || relative.split(['/', '\\']).any(|part| part == "..") {
        return Err(escapes());
    }
    if relative.contains(['/', '\\']) || relative.chars().any(char::is_control) || relative == "." {
        return Err(ToolFailure(format!("{path} is not a plain file name in the session directory")));
    }
    Ok(relative.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl Workspace for Recorder {
        fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure> {
            self.0.push(format!("write {path} {content}"));
            Ok(format!("wrote {path}"))
        }
        fn read_file(&mut self, path: &str) -> Result<String, ToolFailure> {
            self.0.push(format!("read {path}"));
            Ok("text".into())
        }
        fn list_files(&mut self) -> Result<String, ToolFailure> {
            Ok("a.txt".into())
        }
        fn run_python(&mut self, code: &str) -> Result<String, ToolFailure> {
            self.0.push(format!("run {}", code.lines().next().unwrap_or("")));
            Ok("ran".into())
        }
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall { id: "1".into(), name: name.into(), arguments }
    }

    #[test]
    fn paths_that_leave_the_session_are_refused_and_touch_nothing() {
        let mut workspace = Recorder::default();
        for path in ["../../etc/passwd", "/etc/passwd", "../../package.json", "/mnt/data/../x", "..", "a/../../b"] {
            let (observation, is_error) = dispatch(&call("read_file", json!({"filePath": path})), &mut workspace);
            assert!(is_error && observation.contains("path escapes the sandbox"), "{path}: {observation}");
            let (observation, _) = dispatch(&call("write_file", json!({"filePath": path, "content": "x"})), &mut workspace);
            assert!(observation.contains("path escapes the sandbox"), "{path}: {observation}");
        }
        assert!(workspace.0.is_empty(), "nothing reached the session: {:?}", workspace.0);
        assert_eq!(session_path("/mnt/data/hello.txt"), Ok("hello.txt".into()));
    }

    #[test]
    fn unknown_tools_and_malformed_arguments_are_tool_errors() {
        let mut workspace = Recorder::default();
        let (unknown, is_error) = dispatch(&call("delete_everything", json!({})), &mut workspace);
        assert!(is_error && unknown.contains("unknown tool"), "{unknown}");
        let (malformed, _) = dispatch(&call("write_file", json!("{not json")), &mut workspace);
        assert!(malformed.contains("not a JSON object"), "{malformed}");
        let (missing, _) = dispatch(&call("write_file", json!({"filePath": "a.txt"})), &mut workspace);
        assert!(missing.contains("\"content\"") && missing.contains(example("write_file")), "the smallest correct call is shown: {missing}");
        let (aliased, is_error) = dispatch(&call("write_file", json!({"path": "b.txt", "content": "x"})), &mut workspace);
        assert_eq!((aliased.as_str(), is_error), ("wrote b.txt", false));
        let (finished, is_error) = dispatch(&call(FINAL_ANSWER, json!({"text": "All done."})), &mut workspace);
        assert_eq!((finished.as_str(), is_error), ("All done.", false));
        let (ok, is_error) = dispatch(&call("run_tests", json!({})), &mut workspace);
        assert_eq!((ok.as_str(), is_error), ("ran", false));
        assert_eq!(workspace.0, ["write b.txt x", "run import os, shutil, sys, unittest"]);
    }
}
