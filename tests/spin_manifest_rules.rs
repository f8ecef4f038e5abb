//! Boundary: loading a Spin app. Each rule by which `spin up` refuses a
//! manifest (or runtime configuration), applied to a small two-component app
//! broken in one way: `anypath up` must refuse it too, with Spin's words.
//! In the pass under the real Spin (`ANYPATH_TEST_APP_HOST=spin`), the same
//! files go to `spin up` as well, which proves the rule is Spin's.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::app::{AppHost, repo};

/// A valid app: a public gateway and a private store that chain, a store
/// label, a templated optional endpoint left empty, a component variable.
fn base_manifest() -> String {
    let wasm = |name: &str| repo().join(format!("components/target/wasm32-wasip2/release/{name}.wasm")).display().to_string();
    format!(
        r#"spin_manifest_version = 2

[application]
name = "rules"

[variables]
sandbox_hosts = {{ default = "127.0.0.1:9" }}
optional_host = {{ default = "" }}

[[trigger.http]]
route = "/..."
component = "front"

[component.front]
source = "{gateway}"
allowed_outbound_hosts = ["http://back.spin.internal", "http://{{{{ optional_host }}}}"]
[component.front.variables]
sandbox_hosts = "{{{{ sandbox_hosts }}}}"

[[trigger.http]]
route = {{ private = true }}
component = "back"

[component.back]
source = "{store}"
key_value_stores = ["default"]
"#,
        gateway = wasm("gateway"),
        store = wasm("store"),
    )
}

/// One case's files in a temporary directory of its own, removed on drop.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(name: &str, manifest: &str, runtime_config: &str) -> Self {
        let dir = common::scratch(&format!("anypath-rules-{name}-"));
        std::fs::write(dir.path().join("spin.toml"), manifest).expect("manifest written");
        std::fs::write(dir.path().join("runtime-config.toml"), runtime_config).expect("runtime config written");
        Self { dir }
    }
}

const RUNTIME_CONFIG: &str = "[key_value_store.default]\ntype = \"spin\"\npath = \"kv.db\"\n";

/// The hosts this run checks: `anypath up`, and `spin up` in the Spin pass.
fn hosts() -> Vec<AppHost> {
    match AppHost::from_env() {
        AppHost::AnypathUp => vec![AppHost::AnypathUp],
        spin => vec![AppHost::AnypathUp, spin],
    }
}

/// The command that runs `case` on `host`.
fn command(host: &AppHost, case: &Case, env: &[(&str, &str)]) -> Command {
    let mut command = match host {
        AppHost::AnypathUp => {
            let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
            command
                .args(["up", "--sandbox-listen", "127.0.0.1:0", "--e2b-listen", "127.0.0.1:0", "--data-dir"])
                .arg(case.dir.path().join("interpreter"))
                .arg("--runner")
                .arg(common::runner_path());
            command
        }
        AppHost::Spin(spin) => {
            let mut command = Command::new(spin);
            command.arg("up").arg("--state-dir").arg(case.dir.path().join("spin-state"));
            command
        }
    };
    command
        .args(["--listen", "127.0.0.1:0", "--from"])
        .arg(case.dir.path().join("spin.toml"))
        .arg("--runtime-config-file")
        .arg(case.dir.path().join("runtime-config.toml"))
        .envs(env.iter().copied());
    command
}

/// Asserts that `host` loads `case` and serves it (the harness panics with
/// the host's output when it exits instead).
fn assert_serves(host: &AppHost, case: &Case) {
    let mut command = command(host, case, &[]);
    let _serving = match host {
        AppHost::AnypathUp => common::Spawned::start(&mut command, "app serving"),
        AppHost::Spin(_) => common::Spawned::start_when(&mut command, |l| l.trim().strip_prefix("Serving http://").map(str::to_owned)),
    };
}

/// Asserts that every host refuses `manifest` (with `runtime_config` and
/// `env`) with output containing `message`.
fn refused(name: &str, manifest: &str, runtime_config: &str, env: &[(&str, &str)], message: &str) {
    let case = Case::new(name, manifest, runtime_config);
    for host in hosts() {
        let mut child = command(&host, &case, env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the host starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().expect("the host can be waited on").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{name}: {host:?} served an app Spin refuses ({message})");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let output = child.wait_with_output().expect("output");
        let output = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.contains(message), "{name}: {host:?} refused, but its output lacks {message:?}:\n{output}");
    }
}

/// `base_manifest` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    let base = base_manifest();
    assert!(base.contains(from), "the base manifest contains {from:?}");
    base.replacen(from, to, 1)
}

#[test]
fn the_base_app_loads_on_every_host() {
    let case = Case::new("base", &base_manifest(), RUNTIME_CONFIG);
    for host in hosts() {
        assert_serves(&host, &case);
    }
}

#[test]
fn allowed_hosts_are_checked_with_the_defaults() {
    let redis = edited(r#""http://{{ optional_host }}""#, r#""redis://{{ optional_host }}""#);
    refused("redis-empty-host", &redis, RUNTIME_CONFIG, &[], r#"results in invalid config "redis://""#);
    // Whatever the environment sets: Spin checks the defaults.
    refused("redis-empty-host-env", &redis, RUNTIME_CONFIG, &[("SPIN_VARIABLE_OPTIONAL_HOST", "10.0.0.9:6379")], r#"results in invalid config "redis://""#);
    let dash = edited(r#""http://back.spin.internal""#, r#""http://back.spin.internal", "http://127.0.0.1:3001-3010""#);
    refused("dash-port-range", &dash, RUNTIME_CONFIG, &[], r#"port "3001-3010" is not a number"#);
    let no_scheme = edited(r#""http://back.spin.internal""#, r#""back.spin.internal""#);
    refused("no-scheme", &no_scheme, RUNTIME_CONFIG, &[], r#""back.spin.internal" does not contain a scheme"#);
    let allow_all = edited(r#"["http://back.spin.internal", "http://{{ optional_host }}"]"#, r#"["insecure:allow-all"]"#);
    refused("insecure-allow-all", &allow_all, RUNTIME_CONFIG, &[], "'insecure:allow-all' is not allowed");
}

#[test]
fn variables_are_declared_named_and_given_a_value() {
    let upper = edited("optional_host = {", "Optional_host = {");
    refused("variable-name", &upper, RUNTIME_CONFIG, &[], "'_'-separated words must be all lowercase or all UPPERCASE");
    let neither = edited(r#"optional_host = { default = "" }"#, r#"optional_host = { default = "", required = true }"#);
    refused("required-and-default", &neither, RUNTIME_CONFIG, &[], "must be `required` OR have a `default`");
    let required = edited(r#"optional_host = { default = "" }"#, "optional_host = { required = true }");
    refused("required-unset", &required, RUNTIME_CONFIG, &[], r#"no provider resolved required variable(s): [Key("optional_host")]"#);
    let unknown = edited(r#"sandbox_hosts = "{{ sandbox_hosts }}""#, r#"sandbox_hosts = "{{ nope }}""#);
    refused("unknown-variable", &unknown, RUNTIME_CONFIG, &[], r#"invalid variable template: unknown variable "nope""#);
    let unmatched = edited(r#"sandbox_hosts = "{{ sandbox_hosts }}""#, r#"sandbox_hosts = "{{ sandbox_hosts""#);
    refused("unmatched-template", &unmatched, RUNTIME_CONFIG, &[], "unmatched '{{' in template");
}

#[test]
fn components_and_triggers_follow_spins_rules() {
    let snake = base_manifest().replace("component = \"back\"", "component = \"my_back\"").replace("[component.back]", "[component.my_back]");
    refused("component-id", &snake, RUNTIME_CONFIG, &[], "words must be separated with '-', not '_'");
    let missing = edited("component = \"back\"", "component = \"nope\"");
    refused("no-such-component", &missing, RUNTIME_CONFIG, &[], r#"no such component "nope""#);
    let public_private = edited("route = { private = true }", "route = { private = false }");
    refused("private-false", &public_private, RUNTIME_CONFIG, &[], "route must be a string pattern or '{ private = true }'");
    let typo = edited("allowed_outbound_hosts = [", "allowed_outbound_host = [");
    refused("unknown-field", &typo, RUNTIME_CONFIG, &[], "unknown field `allowed_outbound_host`");
    let version = edited("spin_manifest_version = 2", "spin_manifest_version = 3");
    refused("manifest-version", &version, RUNTIME_CONFIG, &[], "invalid manifest version: 3");
    let base = edited("name = \"rules\"", "name = \"rules\"\n[application.trigger.http]\nbase = \"/api\"");
    refused("trigger-base", &base, RUNTIME_CONFIG, &[], "deprecated trigger 'base' field");
}

#[test]
fn store_labels_must_be_defined_by_the_runtime_config() {
    let cache = edited(r#"key_value_stores = ["default"]"#, r#"key_value_stores = ["default", "cache"]"#);
    refused("undefined-label", &cache, RUNTIME_CONFIG, &[], r#"unknown key_value_stores label "cache" for component "back""#);
    let defined = format!("{RUNTIME_CONFIG}[key_value_store.cache]\ntype = \"spin\"\npath = \"cache.db\"\n");
    let case = Case::new("defined-label", &cache, &defined);
    for host in hosts() {
        assert_serves(&host, &case);
    }
    refused("unknown-store-type", &base_manifest(), "[key_value_store.default]\ntype = \"nope\"\n", &[], "the store type 'nope' was not registered");
    refused("unknown-runtime-key", &base_manifest(), "nonsense = 1\n", &[], "unused runtime config key(s): nonsense");
}
