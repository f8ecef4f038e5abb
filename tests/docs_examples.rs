//! The book's examples: every file under `docs/examples/` runs against a
//! fresh `anypath up` (its own key-value file and sandbox listener, a
//! scripted fake LLM for the agent) and must exit 0. Examples check their
//! own answers (`curl -fsS ... | grep ...`). The directory is read, not
//! listed here, so a new example runs without anyone adding it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::app::{App, repo, temp_kv};
use common::fake_llm::{FakeLlm, Reply, tools};
use serde_json::json;

/// How long one example may run (the data runtime's first chart takes seconds).
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

fn examples_dir() -> PathBuf {
    repo().join("docs/examples")
}

/// Every file under `docs/examples/`, by name.
fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("docs/examples exists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "docs/examples holds no examples");
    files
}

fn name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).expect("a UTF-8 file name")
}

/// What runs an example, by its extension.
fn interpreter(path: &Path) -> Command {
    match path.extension().and_then(|e| e.to_str()) {
        // -x: a failing example's output shows each command it ran.
        Some("sh") => {
            let mut bash = Command::new("bash");
            bash.arg("-x");
            bash
        }
        // Jupyter's clients live in a venv of their own.
        Some("py") if name(path).starts_with("jupyter-") => Command::new(common::jupyter_python()),
        // The suite's venv: its Python examples use the clients it installs (E2B's SDK).
        Some("py") => Command::new(std::env::var_os("ANYPATH_PYTHON").unwrap_or_else(|| "python3".into())),
        _ => panic!("{}: an example is a .sh (bash) or .py (python3) file", name(path)),
    }
}

/// The replies of the scripted model an example talks to (none: the
/// example does not reach the model).
fn model_script(example: &str) -> Vec<Reply> {
    match example {
        "agent-run.sh" => vec![
            tools(&[("list_files", json!({}))]),
            Reply::Text("The sandbox has no files yet.".into()),
            tools(&[("write_file", json!({"filePath": "hello.txt", "content": "Hello"}))]),
            Reply::Text("I wrote hello.txt.".into()),
            tools(&[("read_file", json!({"filePath": "../../etc/passwd"}))]),
            Reply::Text("I cannot read files outside the sandbox.".into()),
        ],
        _ => vec![],
    }
}

/// Runs one example to its end (or the timeout); `Err` holds what it printed.
fn run_example(path: &Path) -> Result<Duration, String> {
    let example = name(path);
    let fake = FakeLlm::start(model_script(example));
    let env = fake.env("openai", "rules");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let stem = example.split('.').next().unwrap_or(example);
    let app = App::start_with(&temp_kv(&format!("docs-{stem}")), "spin.toml", &pairs);
    let workdir = common::scratch("anypath-docs-example-");
    let started = Instant::now();
    let mut child = interpreter(path)
        .arg(path)
        .env("APP", &app.base)
        .env("SANDBOX", format!("http://{}", app.sandbox))
        .env("E2B", format!("http://{}", app.e2b.as_deref().expect("anypath up serves E2B's API")))
        .current_dir(workdir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{example} starts: {e}"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("the example's status") {
            break Some(status);
        }
        if started.elapsed() > EXAMPLE_TIMEOUT {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("the example's output");
    let printed = format!(
        "--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match status {
        Some(status) if status.success() => Ok(started.elapsed()),
        Some(status) => Err(format!("{example} failed with {status}\n{printed}")),
        None => Err(format!("{example} ran past {EXAMPLE_TIMEOUT:?}\n{printed}")),
    }
}

#[test]
fn every_example_runs() {
    let mut failures = Vec::new();
    for path in examples() {
        match run_example(&path) {
            Ok(took) => eprintln!("{}: ok in {:.1} s", name(&path), took.as_secs_f64()),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{} example(s) failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

/// Each example is shown in the book (an `{{#include ../examples/NAME}}` in
/// a page), and each shell example stops at its first failing command.
#[test]
fn every_example_is_in_the_book_and_fails_loudly() {
    let mut pages = String::new();
    collect_pages(&repo().join("docs/src"), &mut pages);
    for path in examples() {
        let example = name(&path);
        let _ = interpreter(&path);
        assert!(
            pages.contains(&format!("{{{{#include ../examples/{example}}}}}")),
            "docs/examples/{example} is included by no page under docs/src"
        );
        if example.ends_with(".sh") {
            let text = std::fs::read_to_string(&path).expect("the example reads");
            assert!(text.lines().any(|l| l.trim() == "set -euo pipefail"), "docs/examples/{example} lacks `set -euo pipefail`");
        }
    }
}

/// The text of every Markdown page under `dir`.
fn collect_pages(dir: &Path, into: &mut String) {
    for entry in std::fs::read_dir(dir).expect("docs/src exists") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect_pages(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push_str(&std::fs::read_to_string(&path).expect("a page reads"));
        }
    }
}
