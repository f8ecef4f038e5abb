//! The tools a model may call, each against one sandbox session:
//! `write_file`, `read_file`, `list_files`, `run_python`, `run_command` and `run_tests`,
//! and `final_answer`, which ends the run with the model's answer.
//! A call the model gets wrong (unknown tool, malformed arguments, a path
//! leaving the session directory) is answered with a tool error it can read,
//! showing the smallest correct call, and touches nothing.

use anypath_llm::{ToolCall, ToolSpec};
use serde_json::{Value, json};

/// The code `run_tests` runs in the session (a sandbox has no processes):
/// pytest in-process where the runtime ships it, unittest otherwise, with
/// the session directory and `src/` importable; it prints a line of counts
/// (`FAILED: 1 passed, 1 failed, 0 errors, 0 skipped (pytest 9.2.0)`), then
/// the runner's report, bounded. Modules and bytecode from the session are
/// dropped first, so the tests see the files as they are now.
pub const RUN_TESTS_CODE: &str = include_str!("run_tests.py");

/// The wall-clock budget of one test run, in milliseconds; a runtime whose
/// ceiling is lower keeps its own.
pub const TEST_TIMEOUT_MS: u64 = 60_000;

/// Most files `list_files` shows.
pub const MAX_LISTED_FILES: usize = 200;
/// Most folder levels `list_files` descends; deeper files are counted under their folder.
pub const MAX_LISTED_DEPTH: usize = 6;
/// Most folder levels a path may have.
const MAX_PATH_DEPTH: usize = 16;
/// Longest path, in bytes, and longest part of one.
const MAX_PATH_BYTES: usize = 1024;
const MAX_PART_BYTES: usize = 255;

/// A file of the session, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The path relative to the session directory (`src/app.py`).
    pub path: String,
    pub size_bytes: u64,
}

/// The session a run's tools act on.
pub trait Workspace {
    /// Writes (or replaces) a file at `path`, relative to the session
    /// directory (already checked by [`session_path`]), creating its folders.
    fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure>;
    /// A file's text.
    fn read_file(&mut self, path: &str) -> Result<String, ToolFailure>;
    /// Every file of the session, folders included.
    fn list_files(&mut self) -> Result<Vec<FileEntry>, ToolFailure>;
    /// Runs code in the session; stdout, stderr and the error, as text.
    fn run_python(&mut self, code: &str) -> Result<String, ToolFailure>;
    /// Runs [`RUN_TESTS_CODE`] in the session within [`TEST_TIMEOUT_MS`].
    fn run_tests(&mut self) -> Result<String, ToolFailure>;
    /// Runs a bash command line in the session's shell; its exit code,
    /// stdout and stderr, as text.
    fn run_command(&mut self, command: &str) -> Result<String, ToolFailure>;
}

/// A tool call that failed; the model sees the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub String);

/// The tool that ends a run: its `text` is the run's answer.
pub const FINAL_ANSWER: &str = "final_answer";

/// Every tool's name, in the order the model is told of them.
pub const NAMES: [&str; 7] = ["write_file", "read_file", "list_files", "run_python", "run_tests", "run_command", FINAL_ANSWER];

/// Argument names small models use for a tool's `filePath`.
const PATH_ALIASES: [&str; 5] = ["filePath", "path", "file_path", "filename", "file"];

/// The tools, as the model is told of them.
pub fn specs() -> Vec<ToolSpec> {
    let path = json!({"type": "string", "description": "A file path relative to the session directory, e.g. hello.txt or src/app.py (folders are created)"});
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec { name: name.into(), description: description.into(), parameters };
    let no_arguments = json!({"type": "object", "properties": {}, "additionalProperties": false});
    vec![
        spec(
            "write_file",
            "Create or replace a file in the sandbox session directory; folders in the path (src/app.py) are created.",
            json!({"type": "object", "properties": {"filePath": path, "content": {"type": "string"}}, "required": ["filePath", "content"], "additionalProperties": false}),
        ),
        spec(
            "read_file",
            "Read a text file from the sandbox session directory.",
            json!({"type": "object", "properties": {"filePath": path}, "required": ["filePath"], "additionalProperties": false}),
        ),
        spec("list_files", "List the files in the sandbox session directory and its folders, one path per line.", no_arguments.clone()),
        spec(
            "run_python",
            "Run Python 3 code in the sandbox session as a notebook cell (state persists between calls; no network). Returns stdout, stderr, the value of a last expression, figures shown with plt.show(), and any error.",
            json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"], "additionalProperties": false}),
        ),
        spec(
            "run_tests",
            "Run the session's tests (test_*.py files, e.g. in tests/) with pytest, which also runs unittest tests; src/ and the session directory are importable. Reports passed/failed counts and the failures.",
            no_arguments,
        ),
        spec(
            "run_command",
            "Run a bash command line in the session directory (ls, cat, wc -l, grep, sed, find, python script.py, ...; pipes and redirections work; no network). Returns the exit code, stdout and stderr.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": false}),
        ),
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
        "list_files" => workspace.list_files().map(|files| listing(&files)),
        "run_python" => workspace.run_python(text("code")?),
        "run_command" => workspace.run_command(text("command")?),
        "run_tests" => workspace.run_tests(),
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
        "run_command" => r#"{"name": "run_command", "arguments": {"command": "wc -l hello.txt"}}"#,
        "list_files" => r#"{"name": "list_files", "arguments": {}}"#,
        _ => r#"{"name": "final_answer", "arguments": {"text": "Wrote hello.txt."}}"#,
    }
}

/// The file a model names, relative to the session directory: a name or a
/// path through folders (`src/app.py`; `/mnt/data/` or `./` may prefix it).
/// Anything that would leave the directory is refused before any call is
/// made, and so is a path that names no file (`src/`, `a//b`, `./.`).
pub fn session_path(path: &str) -> Result<String, ToolFailure> {
    let escapes = || ToolFailure(format!("path escapes the sandbox: {path}"));
    let relative = path.strip_prefix("/mnt/data/").unwrap_or(path);
    let relative = relative.strip_prefix("./").unwrap_or(relative);
    if relative.is_empty() || relative.starts_with(['/', '\\']) || relative.split(['/', '\\']).any(|part| part == "..") {
        return Err(escapes());
    }
    let invalid = |why: &str| ToolFailure(format!("{path} is not a file path in the session directory: {why}"));
    if relative.chars().any(char::is_control) || relative.contains('\\') {
        return Err(invalid("it holds a control character or a backslash"));
    }
    let parts: Vec<&str> = relative.split('/').collect();
    if parts.iter().any(|part| part.is_empty() || *part == ".") {
        return Err(invalid("each part between slashes must be a name, e.g. src/app.py"));
    }
    if relative.len() > MAX_PATH_BYTES || parts.len() > MAX_PATH_DEPTH || parts.iter().any(|part| part.len() > MAX_PART_BYTES) {
        return Err(invalid("it is too long or too deep"));
    }
    Ok(relative.to_owned())
}

/// What `list_files` shows: every file's path and size, one a line, sorted;
/// `__pycache__` folders left out; files below [`MAX_LISTED_DEPTH`] folders
/// counted under their folder; at most [`MAX_LISTED_FILES`] lines, then how
/// many more there are.
pub fn listing(files: &[FileEntry]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut deep: Vec<(String, usize)> = Vec::new();
    let mut shown: Vec<&FileEntry> = files.iter().filter(|f| !f.path.split('/').any(|part| part == "__pycache__")).collect();
    shown.sort_by(|a, b| a.path.cmp(&b.path));
    for file in &shown {
        let parts: Vec<&str> = file.path.split('/').collect();
        if parts.len() > MAX_LISTED_DEPTH + 1 {
            let folder = parts[..MAX_LISTED_DEPTH].join("/");
            match deep.last_mut() {
                Some((last, count)) if *last == folder => *count += 1,
                _ => deep.push((folder, 1)),
            }
            continue;
        }
        lines.push(format!("{} ({} bytes)", file.path, file.size_bytes));
    }
    lines.extend(deep.into_iter().map(|(folder, count)| format!("{folder}/ ({count} more files in deeper folders, not listed)")));
    lines.sort();
    if lines.is_empty() {
        return "(no files)".into();
    }
    let total = lines.len();
    if total > MAX_LISTED_FILES {
        lines.truncate(MAX_LISTED_FILES);
        lines.push(format!("[... {} more lines not shown: the listing stops at {MAX_LISTED_FILES}]", total - MAX_LISTED_FILES));
    }
    lines.join("\n")
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
        fn list_files(&mut self) -> Result<Vec<FileEntry>, ToolFailure> {
            Ok(vec![FileEntry { path: "a.txt".into(), size_bytes: 1 }])
        }
        fn run_python(&mut self, code: &str) -> Result<String, ToolFailure> {
            self.0.push(format!("run {}", code.lines().next().unwrap_or("")));
            Ok("ran".into())
        }
        fn run_tests(&mut self) -> Result<String, ToolFailure> {
            self.0.push("tests".into());
            Ok("tested".into())
        }
        fn run_command(&mut self, command: &str) -> Result<String, ToolFailure> {
            self.0.push(format!("command {command}"));
            Ok("exit_code: 0".into())
        }
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall { id: "1".into(), name: name.into(), arguments }
    }

    fn file(path: &str) -> FileEntry {
        FileEntry { path: path.into(), size_bytes: 3 }
    }

    #[test]
    fn paths_that_leave_the_session_are_refused_and_touch_nothing() {
        let mut workspace = Recorder::default();
        for path in [
            "../../etc/passwd",
            "/etc/passwd",
            "../../package.json",
            "/mnt/data/../x",
            "..",
            "a/../../b",
            "src/../../x",
            "src/..",
            "tests/../../../etc/passwd",
            "\\etc\\passwd",
            "src\\..\\..\\x",
            "/mnt/data/src/../../../etc/passwd",
        ] {
            let (observation, is_error) = dispatch(&call("read_file", json!({"filePath": path})), &mut workspace);
            assert!(is_error && observation.contains("path escapes the sandbox"), "{path}: {observation}");
            let (observation, _) = dispatch(&call("write_file", json!({"filePath": path, "content": "x"})), &mut workspace);
            assert!(observation.contains("path escapes the sandbox"), "{path}: {observation}");
        }
        for path in ["src/", "a//b", "./.", "src/./app.py", "a\u{0}b/c", "src\\app.py", &format!("{}x", "d/".repeat(16)), &format!("src/{}", "x".repeat(256))] {
            let (observation, is_error) = dispatch(&call("write_file", json!({"filePath": path, "content": "x"})), &mut workspace);
            assert!(is_error && observation.contains("is not a file path"), "{path:?}: {observation}");
        }
        assert!(workspace.0.is_empty(), "nothing reached the session: {:?}", workspace.0);
        assert_eq!(session_path("/mnt/data/hello.txt"), Ok("hello.txt".into()));
    }

    #[test]
    fn paths_through_folders_reach_the_session_as_given() {
        let mut workspace = Recorder::default();
        for (given, reached) in [("src/app.py", "src/app.py"), ("./tests/test_app.py", "tests/test_app.py"), ("/mnt/data/src/pkg/__init__.py", "src/pkg/__init__.py")] {
            let (observation, is_error) = dispatch(&call("write_file", json!({"filePath": given, "content": "x"})), &mut workspace);
            assert_eq!((observation, is_error), (format!("wrote {reached}"), false));
        }
        dispatch(&call("read_file", json!({"path": "src/app.py"})), &mut workspace);
        assert_eq!(workspace.0, ["write src/app.py x", "write tests/test_app.py x", "write src/pkg/__init__.py x", "read src/app.py"]);
    }

    #[test]
    fn the_listing_shows_paths_through_folders_sorted_and_bounded() {
        let files = [file("tests/test_app.py"), file("src/app.py"), file("src/__pycache__/app.cpython-315.pyc"), file("README.md")];
        assert_eq!(listing(&files), "README.md (3 bytes)\nsrc/app.py (3 bytes)\ntests/test_app.py (3 bytes)");
        assert_eq!(listing(&[]), "(no files)");

        let deep: Vec<FileEntry> = (0..3).map(|i| file(&format!("a/b/c/d/e/f/g/h{i}.txt"))).chain([file("a/b/c/d/e/f/ok.txt")]).collect();
        let shown = listing(&deep);
        assert_eq!(shown, "a/b/c/d/e/f/ (3 more files in deeper folders, not listed)\na/b/c/d/e/f/ok.txt (3 bytes)", "{shown}");

        let many: Vec<FileEntry> = (0..MAX_LISTED_FILES + 5).map(|i| file(&format!("data/{i:04}.csv"))).collect();
        let shown = listing(&many);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), MAX_LISTED_FILES + 1, "{shown}");
        assert_eq!(lines[0], "data/0000.csv (3 bytes)");
        assert!(lines[MAX_LISTED_FILES].contains("5 more lines not shown"), "{}", lines[MAX_LISTED_FILES]);
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
        assert_eq!((ok.as_str(), is_error), ("tested", false));
        let (listed, _) = dispatch(&call("list_files", json!({})), &mut workspace);
        assert_eq!(listed, "a.txt (1 bytes)");
        assert_eq!(workspace.0, ["write b.txt x", "tests"]);
    }
}
