//! The shell runtime on a session's tree: bash's grammar and exit codes,
//! files the host sees, stdin streamed into a running command, `python`
//! through the host import, and the boundaries (limits, the tree's root,
//! the host's environment, interrupts).
//!
//! Needs the shell and the runner components: `cargo xtask test` sets
//! `ANYPATH_SHELL` and `ANYPATH_RUNNER`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::interrupt_tests::{python, runtime};
use crate::shell::{Collected, CommandExit, CommandTree, OutputSink, PythonHost, ShellCommand, ShellConfig, ShellRuntime, StdinFeed, Stream, KILLED, TIMED_OUT};
use crate::{ExecError, FilesLayout, Interrupt, LimitOverrides, Limits};

fn shell_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_SHELL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/shell/shell.wasm"));
    assert!(path.is_file(), "shell component {} is missing: run `cargo xtask test` or set ANYPATH_SHELL", path.display());
    path
}

fn shell() -> &'static ShellRuntime {
    static SHELL: OnceLock<ShellRuntime> = OnceLock::new();
    SHELL.get_or_init(|| {
        let cache_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/shell/cache");
        let limits = Limits { timeout_ms: 20_000, ..Limits::default() };
        runtime().block_on(ShellRuntime::start(ShellConfig { component: shell_path(), cache_dir, limits })).expect("the shell starts")
    })
}

/// The tests' wheelhouse (`ANYPATH_WHEELHOUSE`, which `cargo xtask test` sets).
fn wheelhouse() -> Option<PathBuf> {
    std::env::var_os("ANYPATH_WHEELHOUSE").map(PathBuf::from)
}

/// A sandbox's tree (`/` with `/home/user`), fresh.
fn tree() -> (CommandTree, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("anypath-shell-").tempdir().expect("a session directory");
    FilesLayout::Root.prepare(dir.path()).expect("the layout's folders");
    (CommandTree { dir: dir.path().to_path_buf(), layout: FilesLayout::Root, datasets: None, quota: None }, dir)
}

fn command(tree: &CommandTree, script: &str, output: OutputSink) -> ShellCommand {
    ShellCommand {
        script: script.into(),
        cwd: "/home/user".into(),
        env: vec![("HOME".into(), "/home/user".into()), ("USER".into(), "user".into()), ("PATH".into(), "/usr/bin:/bin".into())],
        tree: tree.clone(),
        stdin: None,
        output,
        limits: LimitOverrides::default(),
        interrupt: None,
        python: Some(PythonHost { runtime: python().clone(), dir: tree.dir.clone(), layout: tree.layout, datasets: None, quota: None, limits: LimitOverrides::default(), wheelhouse: wheelhouse() }),
        node: None,
    }
}

/// Runs `script` on `tree` and gives how it ended with its stdout and stderr.
fn run_on(tree: &CommandTree, script: &str) -> (CommandExit, String, String) {
    let collected = Collected::default();
    let exit = runtime().block_on(shell().run(command(tree, script, collected.sink())));
    let (stdout, stderr) = collected.text();
    (exit, stdout, stderr)
}

fn run(script: &str) -> (CommandExit, String, String) {
    let (tree, _dir) = tree();
    run_on(&tree, script)
}

#[test]
fn runs_bash_grammar_with_bash_exit_codes() {
    let (exit, stdout, _) = run(r#"x="two words"; echo "$x" | wc -w; false || echo "after false: $?"; true && echo and; printf '%s-%d\n' a 7; echo $((6 * 7))"#);
    assert_eq!(exit.exit_code, 0);
    assert_eq!(stdout, "2\nafter false: 1\nand\na-7\n42\n");
    assert_eq!(run("exit 3").0.exit_code, 3);
    let (exit, _, stderr) = run("no-such-command");
    assert_eq!(exit.exit_code, 127, "{stderr}");
}

#[test]
fn files_made_by_commands_are_the_sessions_files() {
    let (tree, dir) = tree();
    let (exit, stdout, stderr) = run_on(&tree, "mkdir -p notes/a && echo hello > notes/a/f.txt && echo more >> notes/a/f.txt && pwd && ls notes/a && cat notes/a/f.txt | sort | head -1");
    assert_eq!(exit.exit_code, 0, "{stderr}");
    assert_eq!(stdout, "/home/user\nf.txt\nhello\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("home/user/notes/a/f.txt")).ok().as_deref(), Some("hello\nmore\n"));
    std::fs::write(dir.path().join("home/user/from-host.txt"), "written by the host\n").expect("a host write");
    let (_, stdout, _) = run_on(&tree, "cat /home/user/from-host.txt; find . -name '*.txt' | sort");
    assert_eq!(stdout, "written by the host\n./from-host.txt\n./notes/a/f.txt\n");
}

#[test]
fn stdin_streams_into_a_running_command() {
    let (tree, _dir) = tree();
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel();
    let sink: OutputSink = Arc::new(move |stream, bytes| {
        if stream == Stream::Stdout {
            let _ = sender.send(bytes);
        }
    });
    let stdin = StdinFeed::new();
    let mut cat = command(&tree, "cat", sink);
    cat.stdin = Some(stdin.clone());
    let shell = shell();
    let exit = runtime().block_on(async {
        let running = tokio::spawn(shell.run(cat));
        stdin.send(b"first line\n");
        // The line comes back while stdin is still open: `cat` answers as it reads.
        let echoed = tokio::time::timeout(Duration::from_secs(10), received.recv()).await.expect("echoed before stdin closed");
        assert_eq!(echoed.as_deref(), Some(&b"first line\n"[..]));
        stdin.send(b"second\n");
        stdin.close();
        running.await.expect("the command ends")
    });
    assert_eq!(exit.exit_code, 0);
}

#[test]
fn python_runs_in_a_fresh_instance_on_the_same_tree() {
    let (tree, dir) = tree();
    let (exit, stdout, stderr) = run_on(&tree, "python -c 'import sys; print(6 * 7, sys.argv[1:])' a b && echo 'print(input().upper())' > up.py && echo shout | python3 up.py");
    assert_eq!(exit.exit_code, 0, "{stderr}");
    assert_eq!(stdout, "42 ['a', 'b']\nSHOUT\n");
    let (exit, _, _) = run_on(&tree, "python -c 'import sys; sys.exit(3)'");
    assert_eq!(exit.exit_code, 3);
    let (exit, _, stderr) = run_on(&tree, "python -c 'open(\"made-by-python.txt\", \"w\").write(\"x\"); 1/0'");
    assert_eq!(exit.exit_code, 1);
    assert!(stderr.contains("ZeroDivisionError"), "{stderr}");
    assert!(dir.path().join("home/user/made-by-python.txt").is_file());
    let (_, stdout, _) = run_on(&tree, "python -c 'print(1)' | wc -l");
    assert_eq!(stdout.trim(), "1");
}

/// Boundary: the instance's fuel and wall-clock limits stop a command that
/// would not end, and the output cap stops an unbounded writer.
#[test]
fn limits_stop_runaway_commands() {
    let (tree, _dir) = tree();
    let collected = Collected::default();
    let mut looping = command(&tree, "while true; do :; done", collected.sink());
    looping.limits = LimitOverrides { fuel: Some(200_000_000), ..LimitOverrides::default() };
    let exit = runtime().block_on(shell().run(looping));
    assert_eq!(exit.exit_code, KILLED);
    assert!(matches!(exit.error, Some(ExecError::FuelExhausted { .. })), "{:?}", exit.error);
    let mut sleeping = command(&tree, "sleep 30", Collected::default().sink());
    sleeping.limits = LimitOverrides { timeout_ms: Some(500), ..LimitOverrides::default() };
    let exit = runtime().block_on(shell().run(sleeping));
    assert_eq!(exit.exit_code, TIMED_OUT);
    let collected = Collected::default();
    let mut yes = command(&tree, "yes", collected.sink());
    yes.limits = LimitOverrides { stdout_bytes: Some(4096), ..LimitOverrides::default() };
    let exit = runtime().block_on(shell().run(yes));
    assert!(exit.stdout_truncated);
    assert_eq!(collected.text().0.len(), 4096);
}

/// Boundary: the tree's root is the root. `..` past `/`, a symlink to a host
/// file and `/proc` reach nothing of the host, and the host's environment
/// is not the command's.
#[test]
fn the_tree_is_all_a_command_reaches() {
    // SAFETY: set once, before any command reads the environment, in this test only.
    unsafe { std::env::set_var("ANYPATH_SHELL_TEST_SECRET", "host-secret-value") };
    let (tree, dir) = tree();
    // A file beside the session's tree on the host: nothing may show it.
    let beside = dir.path().parent().expect("the tree's parent").join(format!("anypath-beside-{}", std::process::id()));
    std::fs::write(&beside, "host file").expect("a host file");
    let name = beside.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let (_, stdout, _) = run_on(&tree, &format!("cd /../../..; pwd; ls -a / /.. ; cat /../{name} ../../../../{name}; find / -name '{name}'"));
    let _ = std::fs::remove_file(&beside);
    assert_eq!(stdout.lines().next(), Some("/"));
    assert!(!stdout.contains(&name) && !stdout.contains("host file"), "a host path showed: {stdout}");
    let (exit, stdout, _) = run_on(&tree, "ln -s /etc/passwd pw; cat pw; cat /etc/passwd; cat /proc/self/environ");
    assert_ne!(exit.exit_code, 0);
    assert!(!stdout.contains("root:"), "a host file was read: {stdout}");
    let (_, stdout, _) = run_on(&tree, "env; python -c 'import os; print(dict(os.environ))'");
    assert!(!stdout.contains("host-secret-value"), "the host's environment leaked: {stdout}");
    assert!(stdout.contains("HOME=/home/user"));
}

/// Boundary: no command reaches the network, Python's sockets included.
#[test]
fn commands_reach_no_network() {
    let (exit, _, stderr) = run("python -c 'import socket; socket.create_connection((\"127.0.0.1\", 22), timeout=1)'");
    assert_eq!(exit.exit_code, 1);
    assert!(stderr.contains("Traceback") && stderr.contains("socket"), "{stderr}");
    let (exit, _, _) = run("curl http://127.0.0.1/");
    assert_ne!(exit.exit_code, 0);
}

#[test]
fn an_interrupt_stops_a_running_command() {
    let (tree, _dir) = tree();
    let interrupt = Interrupt::new();
    let mut sleeping = command(&tree, "sleep 60", Collected::default().sink());
    sleeping.interrupt = Some(interrupt.clone());
    // The clock starts once the shell is compiled: a cold cache on a busy
    // machine takes seconds, and this test is about the interrupt.
    let shell = shell();
    let started = std::time::Instant::now();
    let exit = runtime().block_on(async {
        let running = tokio::spawn(shell.run(sleeping));
        tokio::time::sleep(Duration::from_millis(300)).await;
        interrupt.interrupt();
        running.await.expect("the command ends")
    });
    assert_eq!(exit.exit_code, crate::shell::INTERRUPTED);
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// `pip` installs a wheel and its dependency from the wheelhouse into the
/// session's user site, where the next `python` finds it; the wheelhouse is
/// read-only to the code that reads it.
#[test]
fn pip_installs_from_the_wheelhouse_into_the_tree() {
    assert!(wheelhouse().is_some(), "ANYPATH_WHEELHOUSE is not set: run `cargo xtask test`");
    let (tree, dir) = tree();
    let (exit, stdout, stderr) = run_on(&tree, "pip install python-slugify");
    assert_eq!(exit.exit_code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("Successfully installed text-unidecode-1.3 python-slugify-9.2.0"), "{stdout}");
    let site = dir.path().join("home/user/.local/lib/python3.14/site-packages");
    assert!(site.join("slugify/__init__.py").is_file() && site.join("text_unidecode").is_dir(), "installed in the tree: {}", site.display());
    let (exit, stdout, stderr) = run_on(&tree, "python3 -c 'import slugify; print(slugify.slugify(\"Héllo Wörld\"))'");
    assert_eq!((exit.exit_code, stdout.as_str()), (0, "hello-world\n"), "{stderr}");
    let (exit, _, stderr) = run_on(&tree, "python -c \"open('/wheelhouse/new.whl', 'w')\"");
    assert_eq!(exit.exit_code, 1);
    assert!(stderr.contains("Error"), "the wheelhouse is read-only: {stderr}");
    let (exit, stdout, _) = run_on(&tree, "pip uninstall -y python-slugify; python -c 'import slugify' 2>/dev/null || echo gone");
    assert_eq!((exit.exit_code, stdout.ends_with("gone\n")), (0, true), "{stdout}");
    assert!(!site.join("slugify").exists());
    // From a requirements file, quietly; `--upgrade` of what is newest already changes nothing.
    let (exit, stdout, stderr) = run_on(&tree, "printf 'python-slugify>=9  # a comment\\n' > req.txt && pip install -q -r req.txt && pip install --upgrade python-slugify");
    assert_eq!(exit.exit_code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("Requirement already satisfied: python-slugify in /mnt/data/.local"), "{stdout}");
    assert!(site.join("slugify/__init__.py").is_file());
}

/// Broken UTF-8 crosses as bytes; it is the caller that decides how to show it.
#[test]
fn output_is_bytes() {
    let (tree, _dir) = tree();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let sink: OutputSink = Arc::new(move |_, bytes| into.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(&bytes));
    let exit = runtime().block_on(shell().run(command(&tree, r"printf 'a\xffb'", sink)));
    assert_eq!(exit.exit_code, 0);
    assert_eq!(&seen.lock().unwrap_or_else(PoisonError::into_inner)[..], b"a\xffb");
}
