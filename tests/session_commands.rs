//! Commands in sessions over `/v1`: `POST /v1/sessions/{id}/commands` and
//! the shell escapes of a cell (`!cmd`, `x = !cmd`, `%%bash`) on both
//! runtimes, with the session's files and live state; refusals in the
//! service's error envelope.
//!
//! Boundary proved: a command sees none of the host's environment
//! (`the_hosts_environment_is_not_a_commands`).

use crate::common;

use serde_json::{Value, json};

use common::service::Service;

fn command(service: &Service, session: &str, body: Value) -> (u16, Value) {
    service.json("key-alice", "POST", &format!("/v1/sessions/{session}/commands"), Some(body))
}

fn run(service: &Service, session: &str, code: &str, runtime: &str) -> Value {
    let (status, report) = service.json("key-alice", "POST", &format!("/v1/sessions/{session}/run"), Some(json!({"code": code, "runtime": runtime})));
    assert_eq!(status, 200, "{report}");
    report
}

#[test]
fn a_command_and_a_cell_share_the_sessions_files() {
    let dir = common::scratch("anypath-commands-files-");
    let service = Service::start(dir.path());
    run(&service, "c1", "kept = 'state'\nopen('from-python.txt', 'w').write('py\\n')", "python");
    let (status, ran) = command(&service, "c1", json!({"command": "pwd; cat from-python.txt; echo shell > from-shell.txt; ls | sort"}));
    assert_eq!(status, 200, "{ran}");
    assert_eq!((ran["exit_code"].as_i64(), ran["stdout"].as_str()), (Some(0), Some("/mnt/data\npy\nfrom-python.txt\nfrom-shell.txt\n")), "{ran}");
    let report = run(&service, "c1", "open('from-shell.txt').read() + kept", "python");
    assert_eq!(report["results"][0]["text"], json!("'shell\\nstate'"), "the file is there and the cell's state was kept: {report}");
    let (_, failed) = command(&service, "c1", json!({"command": "echo out; echo err >&2; exit 7", "env": {"GREETING": "hi"}}));
    assert_eq!((failed["exit_code"].as_i64(), failed["stdout"].as_str(), failed["stderr"].as_str()), (Some(7), Some("out\n"), Some("err\n")), "{failed}");
    let (_, with_env) = command(&service, "c1", json!({"command": "echo $GREETING; cat", "env": {"GREETING": "hi"}, "stdin": "piped in\n"}));
    assert_eq!(with_env["stdout"], json!("hi\npiped in\n"), "{with_env}");
}

#[test]
fn shell_escapes_run_in_cells_on_both_runtimes() {
    let dir = common::scratch("anypath-commands-escapes-");
    let service = Service::start_with(dir.path(), &["--python-data", &common::python_data_dir().display().to_string()]);
    for runtime in ["python", "python-data"] {
        let session = format!("esc-{runtime}");
        let report = run(&service, &session, "n = 3\n!echo n is {n} and {n * 2}\nlines = !printf 'a\\nb\\n'\nlen(lines)", runtime);
        assert_eq!((report["stdout"].as_str(), report["results"][0]["text"].as_str()), (Some("n is 3 and 6\n"), Some("2")), "{runtime}: {report}");
        let report = run(&service, &session, "%%bash\nfor f in x y; do echo $f > $f.txt; done\nls *.txt | wc -l", runtime);
        assert_eq!(report["stdout"], json!("2\n"), "{runtime}: {report}");
        let report = run(&service, &session, "!exit 1\nraise ValueError('after the command')\n!echo never", runtime);
        assert!(report["stdout"].as_str().is_some_and(|s| !s.contains("never")), "{runtime}: the cell ends where Python raises: {report}");
        assert_eq!(report["error"]["type_name"], json!("ValueError"), "{runtime}: {report}");
    }
}

/// `pip` from the operator's wheelhouse, in a command and in cells, on both
/// runtimes: what it installs is in the session's files and imports in the
/// next cell without a restart; what the runtime has, or nobody has, is
/// answered as pip answers.
#[test]
fn pip_installs_from_the_wheelhouse_into_the_session() {
    let dir = common::scratch("anypath-commands-pip-");
    let wheelhouse = common::wheelhouse_dir().display().to_string();
    let service = Service::start_with(dir.path(), &["--python-data", &common::python_data_dir().display().to_string(), "--wheelhouse", &wheelhouse]);
    for runtime in ["python", "python-data"] {
        let session = format!("pip-{runtime}");
        run(&service, &session, "before = 'kept'", runtime);
        let report = run(&service, &session, "!pip install python-slugify", runtime);
        let stdout = report["stdout"].as_str().unwrap_or_default();
        assert!(stdout.contains("Successfully installed text-unidecode-1.3 python-slugify-9.2.0"), "{runtime}: the package and its dependency: {report}");
        let report = run(&service, &session, "import slugify\nslugify.slugify('Héllo Wörld') + ' ' + before", runtime);
        assert_eq!(report["results"][0]["text"], json!("'hello-world kept'"), "{runtime}: imported in the next cell, state kept: {report}");
        let (_, again) = command(&service, &session, json!({"command": "pip install -q python-slugify; echo $?; pip install python-slugify"}));
        let stdout = again["stdout"].as_str().unwrap_or_default();
        assert!(stdout.starts_with("0\n") && stdout.contains("Requirement already satisfied: python-slugify in /mnt/data/.local/lib/python3."), "{runtime}: {again}");
        let (_, missing) = command(&service, &session, json!({"command": "pip install no-such-package-here"}));
        let stderr = missing["stderr"].as_str().unwrap_or_default();
        assert_eq!(missing["exit_code"], json!(1), "{runtime}: {missing}");
        assert!(stderr.contains("ERROR: No matching distribution found for no-such-package-here") && stderr.contains("no network") && stderr.contains("/wheelhouse"), "{runtime}: {missing}");
        let (_, pinned) = command(&service, &session, json!({"command": "pip install 'text-unidecode==0.1'"}));
        assert!(pinned["stderr"].as_str().unwrap_or_default().contains("(from versions: 1.3)"), "{runtime}: {pinned}");
        let (_, listed) = command(&service, &session, json!({"command": "pip list | grep -i slugify; python -m pip show text-unidecode | head -2"}));
        assert_eq!(listed["stdout"].as_str().map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")), Some("python-slugify 9.2.0 Name: text-unidecode Version: 1.3".into()), "{runtime}: {listed}");
    }
    // The data runtime bundles numpy: pip says so and changes nothing.
    let report = run(&service, "pip-python-data", "%pip install numpy", "python-data");
    assert!(report["stdout"].as_str().is_some_and(|s| s.contains("Requirement already satisfied: numpy")), "{report}");
    // The standard-library runtime has no numpy and the wheelhouse none either.
    let report = run(&service, "pip-python", "%pip install numpy", "python");
    assert!(report["stdout"].as_str().unwrap_or_default().contains("No matching distribution found for numpy") || report["stderr"].as_str().unwrap_or_default().contains("No matching distribution found for numpy"), "{report}");
    // Installed packages are the session's files: another session has none.
    let report = run(&service, "pip-other", "import importlib.util\nimportlib.util.find_spec('slugify') is None", "python");
    assert_eq!(report["results"][0]["text"], json!("True"), "{report}");
}

/// A wheel with native code for another platform is refused by name, and
/// nothing is installed.
#[test]
fn pip_refuses_a_native_wheel() {
    let dir = common::scratch("anypath-commands-pip-native-");
    let wheelhouse = dir.path().join("wheelhouse");
    std::fs::create_dir_all(&wheelhouse).expect("a wheelhouse");
    let native = "fastthing-1.0-cp312-cp312-manylinux_2_17_x86_64.whl";
    std::fs::copy(common::wheelhouse_dir().join("tabulate-0.10.0-py3-none-any.whl"), wheelhouse.join(native)).expect("a wheel named for linux");
    let python_data = common::python_data_dir().display().to_string();
    let service = Service::start_with(&dir.path().join("data"), &["--python-data", &python_data, "--wheelhouse", &wheelhouse.display().to_string()]);
    let (_, refused) = command(&service, "native", json!({"command": "pip install fastthing; echo \"exit $?\"; test -d ~/.local && echo made || echo none"}));
    let stderr = refused["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains(native) && stderr.contains("native code") && stderr.contains("pure-Python wheels"), "{refused}");
    assert!(refused["stdout"].as_str().is_some_and(|s| s.ends_with("exit 1\nnone\n")), "{refused}");
}

#[test]
fn bad_commands_are_refused_in_the_envelope() {
    let dir = common::scratch("anypath-commands-refused-");
    let service = Service::start(dir.path());
    for (body, code) in [
        (json!({"command": "  "}), "invalid_request"),
        (json!({"command": "ls", "user": "admin"}), "invalid_request"),
        (json!({"command": "ls", "cwd": "relative/dir"}), "invalid_request"),
        (json!({"command": "ls", "env": {"BAD NAME": "x"}}), "invalid_request"),
        (json!({"commands": "ls"}), "invalid_json"),
    ] {
        let (status, answer) = command(&service, "r1", body.clone());
        assert_eq!((status, answer["error"]["code"].as_str()), (400, Some(code)), "{body}: {answer}");
        assert!(answer["error"]["request_id"].is_string(), "{answer}");
    }
    let (status, _) = service.json("", "POST", "/v1/sessions/r1/commands", Some(json!({"command": "ls"})));
    assert_eq!(status, 401);
}

/// Boundary: the host's environment never reaches a command (nor the
/// Python it starts).
#[test]
fn the_hosts_environment_is_not_a_commands() {
    let dir = common::scratch("anypath-commands-env-");
    let secret = ("ANYPATH_HOST_SECRET".to_owned(), "do-not-leak-4711".to_owned());
    let service = Service::start_with_env(dir.path(), &[secret]);
    let (_, ran) = command(&service, "e1", json!({"command": "env; cat /proc/self/environ; python -c 'import os; print(os.environ)'"}));
    let all = format!("{}{}", ran["stdout"], ran["stderr"]);
    assert!(!all.contains("do-not-leak-4711"), "the host's environment leaked: {all}");
    assert!(ran["stdout"].as_str().is_some_and(|s| s.contains("HOME=/mnt/data")), "{ran}");
}

/// Boundary: a session runs at most eight commands at once; the ninth is
/// refused (`429 too_many_commands`) and the session works on. (The
/// tenant's admission slots are raised here, so the session's cap is the
/// one met.)
#[test]
fn commands_at_once_are_capped_per_session() {
    let dir = common::scratch("anypath-commands-cap-");
    let service = Service::start_with(dir.path(), &["--max-concurrent", "32", "--tenant-max-concurrent", "32"]);
    command(&service, "cap", json!({"command": "true"}));
    let sleepers: Vec<_> = (0..8)
        .map(|_| {
            let base = service.base.clone();
            std::thread::spawn(move || {
                reqwest::blocking::Client::new()
                    .post(format!("{base}/v1/sessions/cap/commands"))
                    .header("x-api-key", "key-alice")
                    .json(&json!({"command": "sleep 3"}))
                    .send()
                    .map(|r| r.status().as_u16())
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (status, refused) = command(&service, "cap", json!({"command": "echo one too many"}));
    assert_eq!((status, refused["error"]["code"].as_str()), (429, Some("too_many_commands")), "{refused}");
    for sleeper in sleepers {
        assert_eq!(sleeper.join().ok().and_then(Result::ok), Some(200));
    }
    let (status, ran) = command(&service, "cap", json!({"command": "echo still here"}));
    assert_eq!((status, ran["stdout"].as_str()), (200, Some("still here\n")), "{ran}");
}
