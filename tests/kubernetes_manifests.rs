//! The Kubernetes manifests in `deploy/kubernetes/`, validated offline by
//! `tests/support/validate_manifests.py` (run with the venv's Python, which
//! `cargo xtask test` gives `kubernetes-validate`): every YAML document
//! against Kubernetes' own schemas or the vendored SpinApp CRD, then the
//! documents against each other and against spin.toml's `[variables]`.
//!
//! The validator is shown able to fail: copies of the directory with one
//! deliberate error each must be rejected, with the error named, while the
//! unchanged copy passes under the same conditions.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifests() -> PathBuf {
    repo().join("deploy/kubernetes")
}

/// What one run of the validator printed, and how it exited.
struct Verdict {
    code: Option<i32>,
    stdout: String,
}

fn validate(dir: &Path, spin_toml: &Path) -> Verdict {
    let output = Command::new(crate::common::venv_python())
        .arg(repo().join("tests/support/validate_manifests.py"))
        .arg(dir)
        .arg("--spin-toml")
        .arg(spin_toml)
        .output()
        .expect("the validator starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A run that did not reach its summary proves nothing either way.
    assert!(
        stdout.contains("\nsummary: ") && output.status.code().is_some_and(|c| c <= 1),
        "the validator did not finish ({}):\n{stdout}\n{stderr}",
        output.status
    );
    Verdict { code: output.status.code(), stdout }
}

/// The variables the manifests set, as spin.toml declares them: the
/// negative cases run against this stand-in, so that each is judged against
/// a baseline that passes whatever the state of spin.toml.
const SPIN_VARIABLES: &str = r#"
[variables]
store_backend = { default = "kv" }
redis_url = { default = "", secret = true }
redis_allowed = { default = "" }
sandbox_hosts = { default = "127.0.0.1:3001" }
sandbox_allowed = { default = "127.0.0.1:3001" }
sandbox_token = { default = "", secret = true }
auth_token = { default = "", secret = true }
api_keys = { default = "", secret = true }
planner_mode = { default = "" }
llm_provider = { default = "openai" }
llm_host = { default = "" }
llm_model = { default = "" }
llm_api_key = { default = "", secret = true }
"#;

/// A scratch copy of `deploy/kubernetes/` plus a stand-in spin.toml, in a
/// temporary directory removed on drop.
struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    fn new(name: &str) -> Self {
        let root = tempfile::Builder::new().prefix(&format!("anypath-k8s-{name}-")).tempdir().expect("a temporary directory");
        copy_dir(&manifests(), &root.path().join("kubernetes"));
        std::fs::write(root.path().join("spin.toml"), SPIN_VARIABLES).expect("write the stand-in spin.toml");
        Self { root }
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("kubernetes")
    }

    fn spin_toml(&self) -> PathBuf {
        self.root.path().join("spin.toml")
    }

    /// Replaces the one occurrence of `from` in `file` (relative to the copy, or `spin.toml`).
    fn edit(&self, file: &str, from: &str, to: &str) {
        let path = if file == "spin.toml" { self.spin_toml() } else { self.dir().join(file) };
        let text = std::fs::read_to_string(&path).expect("read the copy");
        assert_eq!(text.matches(from).count(), 1, "{file} should hold {from:?} exactly once");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write the copy");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read deploy/kubernetes") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a manifest");
        }
    }
}

/// Every YAML file under `dir`, relative to it.
fn yaml_files(dir: &Path, base: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read deploy/kubernetes") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            yaml_files(&path, base, found);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            found.push(path.strip_prefix(base).expect("under the base").display().to_string());
        }
    }
}

/// Runs one deliberate error: the copy must be rejected with `expected` named.
fn rejected(case: &str, change: impl FnOnce(&Scratch), expected: &str) {
    let scratch = Scratch::new(case);
    change(&scratch);
    let verdict = validate(&scratch.dir(), &scratch.spin_toml());
    assert_eq!(verdict.code, Some(1), "{case}: the validator accepted it:\n{}", verdict.stdout);
    assert!(verdict.stdout.contains(expected), "{case}: expected {expected:?} in:\n{}", verdict.stdout);
}

#[test]
fn the_manifests_are_valid_and_consistent_with_spin_toml() {
    let verdict = validate(&manifests(), &repo().join("spin.toml"));
    assert_eq!(verdict.code, Some(0), "deploy/kubernetes does not validate:\n{}", verdict.stdout);
    let mut files = Vec::new();
    yaml_files(&manifests(), &manifests(), &mut files);
    for file in &files {
        assert!(verdict.stdout.contains(&format!("valid {file}#")), "{file} was not validated:\n{}", verdict.stdout);
    }
    for document in [
        "namespace.yaml#1 Namespace/anypath (Kubernetes",
        "secret.example.yaml#1 Secret/anypath-secrets (Kubernetes",
        "redis.yaml#2 StatefulSet/anypath-redis (Kubernetes",
        "sandbox.yaml#1 Service/anypath-sandbox (Kubernetes",
        "sandbox.yaml#2 StatefulSet/anypath-sandbox (Kubernetes",
        "interpreter.yaml#1 Service/anypath-interpreter (Kubernetes",
        "interpreter.yaml#2 Deployment/anypath-interpreter (Kubernetes",
        "interpreter.yaml#3 PodDisruptionBudget/anypath-interpreter (Kubernetes",
        "spinapp.yaml#1 SpinApp/anypath (CRD spinapps.core.spinkube.dev v1alpha1",
        "kustomization.yaml#1 Kustomization (its resources and namespace",
    ] {
        assert!(verdict.stdout.contains(&format!("valid {document}")), "{document} missing:\n{}", verdict.stdout);
    }
    for check in ["Secret references", "sandbox hosts", "Redis", "sandbox token", "Spin variables against spin.toml", "shared interpreter"] {
        assert!(verdict.stdout.contains(&format!("consistent {check}\n")), "{check} missing:\n{}", verdict.stdout);
    }
}

#[test]
fn an_unchanged_copy_passes_against_the_stand_in_spin_toml() {
    let scratch = Scratch::new("unchanged");
    let verdict = validate(&scratch.dir(), &scratch.spin_toml());
    assert_eq!(verdict.code, Some(0), "the baseline of the negative cases fails:\n{}", verdict.stdout);
}

#[test]
fn schema_errors_are_rejected() {
    rejected(
        "replicas-as-a-word",
        |s| s.edit("spinapp.yaml", "replicas: 3", "replicas: \"three\""),
        "INVALID spinapp.yaml#1 SpinApp/anypath: spec.replicas: 'three' is not of type 'integer'",
    );
    rejected(
        "unknown-spinapp-field",
        |s| s.edit("spinapp.yaml", "\nspec:\n", "\nspec:\n  replica: 3\n"),
        "INVALID spinapp.yaml#1 SpinApp/anypath: spec: Additional properties are not allowed ('replica' was unexpected)",
    );
    rejected(
        "unknown-secret-ref-field",
        |s| s.edit("spinapp.yaml", "key: llm-api-key", "key: llm-api-key\n          optonal: true"),
        "('optonal' was unexpected)",
    );
    rejected(
        "spinapp-metadata-typo",
        |s| s.edit("spinapp.yaml", "  namespace: anypath\n", "  namespace: anypath\n  lables: {}\n"),
        "SpinApp/anypath: metadata: Additional properties are not allowed ('lables' was unexpected)",
    );
    rejected(
        "service-port-as-a-string",
        |s| s.edit("sandbox.yaml", "port: 3001", "port: \"3001\""),
        "INVALID sandbox.yaml#1 Service/anypath-sandbox: spec.ports.0.port: '3001' is not of type 'integer'",
    );
    rejected(
        "unknown-container-field",
        |s| s.edit("sandbox.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"),
        "('readOnlyRootFileSystem' was unexpected)",
    );
}

#[test]
fn inconsistencies_are_rejected() {
    rejected(
        "more-sandbox-pods-than-hosts",
        |s| s.edit("sandbox.yaml", "replicas: 3", "replicas: 4"),
        "INCONSISTENT sandbox hosts: sandbox_hosts names 3 pods of sandbox.yaml#2 StatefulSet/anypath-sandbox",
    );
    rejected(
        "sandbox-listens-on-loopback",
        |s| s.edit("sandbox.yaml", "--listen=0.0.0.0:3001", "--listen=127.0.0.1:3001"),
        "should listen on 0.0.0.0:3001",
    );
    rejected(
        "sandbox-service-not-headless",
        |s| s.edit("sandbox.yaml", "clusterIP: None", "clusterIP: \"\""),
        "is not headless",
    );
    rejected(
        "allowlist-misses-the-hosts",
        |s| s.edit("spinapp.yaml", "\"*.anypath-sandbox.anypath", "\"*.sandbox.anypath"),
        "does not admit sandbox_hosts entry",
    );
    rejected(
        "missing-secret-key",
        |s| s.edit("spinapp.yaml", "key: llm-api-key", "key: llm-key"),
        "refers to key 'llm-key' of Secret 'anypath-secrets', which it lacks",
    );
    rejected(
        "token-from-another-key",
        |s| s.edit("sandbox.yaml", "key: sandbox-token", "key: auth-token"),
        "INCONSISTENT sandbox token:",
    );
    rejected(
        "redis-url-elsewhere",
        |s| s.edit("secret.example.yaml", "@anypath-redis.anypath.svc.cluster.local:6379\"", "@redis.anypath.svc.cluster.local:6379\""),
        "does not point at the host and port of redis_allowed 'redis://anypath-redis.anypath.svc.cluster.local:6379'",
    );
    rejected(
        "redis-allowed-without-scheme",
        |s| s.edit("spinapp.yaml", "value: redis://anypath-redis.", "value: anypath-redis."),
        "redis_allowed 'anypath-redis.anypath.svc.cluster.local:6379' is not a redis:// allowed_outbound_hosts entry",
    );
    rejected(
        "redis-url-with-another-password",
        |s| s.edit("secret.example.yaml", ":REPLACE-redis-password@anypath-redis.anypath.svc.cluster.local:6379\"", ":another@anypath-redis.anypath.svc.cluster.local:6379\""),
        "redis_url's password is not the one redis.yaml#2 StatefulSet/anypath-redis requires",
    );
    rejected(
        "governing-service-missing",
        |s| s.edit("redis.yaml", "serviceName: anypath-redis", "serviceName: redis"),
        "names serviceName 'redis', which is not a Service of its namespace",
    );
    rejected(
        "manifest-left-out-of-kustomization",
        |s| s.edit("kustomization.yaml", "  - redis.yaml\n", ""),
        "INVALID kustomization.yaml#1 Kustomization: kustomization.yaml lists",
    );
    rejected(
        "variable-unknown-to-spin-toml",
        |s| s.edit("spin.toml", "redis_allowed = { default = \"\" }\n", ""),
        "the SpinApp sets redis_allowed, which spin.toml's [variables] does not declare",
    );
    rejected(
        "required-variable-unset",
        |s| s.edit("spin.toml", "[variables]\n", "[variables]\nexec_fuel = { required = true }\n"),
        "spin.toml's exec_fuel has no default and the SpinApp does not set it",
    );
    rejected(
        "secret-variable-set-in-plain",
        |s| s.edit("spin.toml", "llm_host = { default = \"\" }", "llm_host = { default = \"\", secret = true }"),
        "spin.toml marks llm_host secret, but the SpinApp does not take it from a Secret",
    );
}

/// The `valueFrom` of an env entry in interpreter.yaml that reads `key` of the Secret.
fn from_secret(key: &str) -> String {
    format!("\n              valueFrom:\n                secretKeyRef:\n                  name: anypath-secrets\n                  key: {key}")
}

#[test]
fn a_shared_interpreter_that_would_lose_or_leak_sessions_is_rejected() {
    rejected(
        "coordination-elsewhere",
        |s| s.edit("secret.example.yaml", "@anypath-redis.anypath.svc.cluster.local:6379/1", "@anypath-sandbox.anypath.svc.cluster.local:3001/1"),
        "INCONSISTENT shared interpreter: interpreter.yaml#2 Deployment/anypath-interpreter container interpreter: the coordination URL 'redis://anypath-sandbox.anypath.svc.cluster.local:3001/1' does not name a Redis Service defined here and one of its ports",
    );
    rejected(
        "coordination-with-another-password",
        |s| s.edit("secret.example.yaml", ":REPLACE-redis-password@anypath-redis.anypath.svc.cluster.local:6379/1", ":another@anypath-redis.anypath.svc.cluster.local:6379/1"),
        "the coordination URL's password is not the one redis.yaml#2 StatefulSet/anypath-redis requires",
    );
    rejected(
        "coordination-on-the-tenant-database",
        |s| s.edit("secret.example.yaml", "6379/1\"", "6379/0\""),
        "the coordination URL uses database 0 of anypath-redis.anypath.svc.cluster.local:6379, the one the app's redis_url keeps tenant data in",
    );
    rejected(
        "coordination-in-plain",
        |s| {
            let entry = format!("- name: ANYPATH_COORDINATION{}", from_secret("session-coordination-url"));
            s.edit("interpreter.yaml", &entry, "- name: ANYPATH_COORDINATION\n              value: redis://anypath-redis.anypath.svc.cluster.local:6379/1");
        },
        "the coordination URL should come from a Secret: it carries Redis's password",
    );
    rejected(
        "session-store-not-s3",
        |s| s.edit("interpreter.yaml", "value: s3://anypath-sessions/", "value: https://anypath-sessions/"),
        "the session store 'https://anypath-sessions/interpreter' is not an s3://bucket[/prefix] URL",
    );
    rejected(
        "session-store-bucket-s3-refuses",
        |s| s.edit("interpreter.yaml", "value: s3://anypath-sessions/interpreter", "value: s3://Anypath_Sessions/interpreter/"),
        "the session store 's3://Anypath_Sessions/interpreter/' is not an s3://bucket[/prefix] URL",
    );
    rejected(
        "session-store-missing",
        |s| s.edit("interpreter.yaml", "            - name: ANYPATH_SESSION_STORE\n              value: s3://anypath-sessions/interpreter\n", ""),
        "container interpreter: sets a coordination URL but no session store",
    );
    rejected(
        "secret-access-key-in-plain",
        |s| {
            let entry = format!("- name: AWS_SECRET_ACCESS_KEY{}", from_secret("session-store-secret-access-key"));
            s.edit("interpreter.yaml", &entry, "- name: AWS_SECRET_ACCESS_KEY\n              value: not-a-secret");
        },
        "container interpreter: should take AWS_SECRET_ACCESS_KEY from a Secret, not a plain value",
    );
    rejected(
        "signing-key-as-a-flag",
        |s| s.edit("interpreter.yaml", "            - --lease-seconds=10\n", "            - --lease-seconds=10\n            - --signing-key=not-a-secret\n"),
        "container interpreter: should take ANYPATH_SIGNING_KEY from a Secret, not a plain value",
    );
    rejected(
        "sticky-interpreter-service",
        |s| s.edit("interpreter.yaml", "sessionAffinity: None", "sessionAffinity: ClientIP"),
        "INCONSISTENT shared interpreter: interpreter.yaml#1 Service/anypath-interpreter sets sessionAffinity 'ClientIP'",
    );
    rejected(
        "interpreter-service-selects-other-pods",
        |s| s.edit("interpreter.yaml", "  selector:\n    app.kubernetes.io/name: anypath-interpreter\n", "  selector:\n    app.kubernetes.io/part-of: anypath\n"),
        "interpreter.yaml#1 Service/anypath-interpreter selects the pods of sandbox.yaml#2 StatefulSet/anypath-sandbox too",
    );
    rejected(
        "one-interpreter",
        |s| s.edit("interpreter.yaml", "replicas: 3", "replicas: 1"),
        "interpreter.yaml#2 Deployment/anypath-interpreter has 1 replica(s)",
    );
    rejected(
        "grace-too-short-for-the-hand-over",
        |s| s.edit("interpreter.yaml", "terminationGracePeriodSeconds: 180", "terminationGracePeriodSeconds: 75"),
        "interpreter.yaml#2 Deployment/anypath-interpreter's terminationGracePeriodSeconds 75 is shorter than the 161 s a graceful stop may take",
    );
    rejected(
        "interpreter-listens-on-loopback",
        |s| s.edit("interpreter.yaml", "--listen=0.0.0.0:3001", "--listen=127.0.0.1:3001"),
        "interpreter.yaml#2 Deployment/anypath-interpreter should listen on 0.0.0.0:3001 (--listen=), found ['127.0.0.1:3001']",
    );
}
