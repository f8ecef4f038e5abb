//! The REST face under an off-the-shelf API fuzzer. schemathesis (pinned,
//! installed into `.venv` by `cargo xtask test`) reads `/openapi.json` from a
//! running `anypath up` and runs every one of its checks (server errors,
//! status codes, content types, headers and bodies against the spec, valid
//! data accepted, invalid data rejected, undeclared methods answered 405 with
//! `Allow`, `Allow` on `OPTIONS` matching the spec, stateful create-read-delete
//! sequences), with a fixed seed and a bounded number of examples. Any finding
//! fails the test: the spec must describe what the server does.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::app::{App, repo, temp_kv};
use common::fake_llm::{FakeLlm, Reply};

/// The schemathesis command `cargo xtask test` installed.
fn schemathesis() -> PathBuf {
    let path = std::env::var_os("ANYPATH_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/schemathesis"));
    assert!(path.is_file(), "schemathesis {} is missing: run `cargo xtask test`", path.display());
    path
}

/// Runs schemathesis with every check against `app`; panics with its report on any finding.
fn fuzz(app: &App, name: &str, max_examples: u32, exclude_run: bool, excluded_checks: &[&str]) {
    // Its own working directory: no example database or report is shared between runs.
    let kv = temp_kv(&format!("{name}-schemathesis"));
    let workdir = kv.parent().expect("a temporary directory");
    let output = Command::new(schemathesis())
        .current_dir(workdir)
        .args(["run", &format!("{}/openapi.json", app.base), "--checks", "all"])
        // A configured app lists POST /run, whose model turns a fuzzer's
        // bodies cannot script: tests/agent_run.rs drives it instead.
        .args(if exclude_run { &["--exclude-path", "/run"][..] } else { &[] })
        .args(excluded_checks.iter().flat_map(|check| ["--exclude-checks", *check]))
        .args(["--header", &format!("X-Session-ID: {name}")])
        .args(["--seed", "20261122", "--max-examples", &max_examples.to_string()])
        .args(["--generation-database", "none", "--workers", "1", "--no-color"])
        .output()
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "schemathesis found problems ({}):\n{report}\n{}", output.status, String::from_utf8_lossy(&output.stderr));
    // A run that tested nothing would also exit 0: require the cases it generated.
    let generated = report
        .lines()
        .find_map(|line| line.trim().strip_suffix(" passed").and_then(|l| l.split(" generated").next()).and_then(|n| n.trim().parse::<u32>().ok()))
        .unwrap_or(0);
    assert!(generated >= 500, "schemathesis generated only {generated} cases:\n{report}");
}

#[test]
fn the_fuzzer_finds_nothing_under_the_rule_planner() {
    let app = App::start(&temp_kv("fuzz-rules"));
    // Without an LLM the spec does not offer POST /run, so nothing is excluded.
    fuzz(&app, "fuzz-rules", 60, false, &[]);
}

/// In llm mode every method on every collection path is the model's to plan,
/// and the spec says so; the fake model plans CRUD like the rules and answers
/// 404 for every other action.
#[test]
fn the_fuzzer_finds_nothing_under_the_llm_planner() {
    let fake = FakeLlm::start(vec![]).otherwise(Reply::Oracle);
    let env = fake.env("openai", "llm");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = App::start_with(&temp_kv("fuzz-llm"), "spin.toml", &pairs);
    // The spec offers every method on `/{collection}/{id}` to the model, and
    // the fake model finds no action for a POST there (404). The fuzzer links
    // that POST to a just-created document and reads the 404 as the document
    // gone (`ensure_resource_availability`), which the model's answer is not:
    // GET, PUT, PATCH and DELETE of it are checked, and the rules run checks all.
    fuzz(&app, "fuzz-llm", 25, true, &["ensure_resource_availability"]);
    assert!(!fake.calls().is_empty(), "the model planned the requests");
}
