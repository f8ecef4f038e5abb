"""E2B's Python SDK (`e2b-code-interpreter`, pinned by `cargo xtask test`)
running commands in anypath's sandboxes: `sandbox.commands` as E2B's own
commands tests use it (foreground and background, streaming, stdin, kill,
list, connect, env and cwd), the files the commands make as `sandbox.files`
sees them, and the attacks a shell invites, each contained.

Usage: e2b_commands_checks.py API_URL KEY [CHECK ...]
"""

import os
import sys
import threading
import time

API_URL, KEY = sys.argv[1], sys.argv[2]
os.environ["E2B_API_URL"] = API_URL
os.environ["E2B_SANDBOX_URL"] = API_URL
os.environ["E2B_API_KEY"] = KEY

from e2b import CommandExitException, TimeoutException  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402
from sdk_checks import SANDBOXES, check, run_checks  # noqa: E402


def sandbox():
    created = Sandbox.create(timeout=120, metadata={"suite": "e2b_commands_checks"})
    SANDBOXES.append(created)
    return created


@check
def foreground_output_and_exit_codes():
    sbx = sandbox()
    result = sbx.commands.run("echo hello; echo to-stderr >&2")
    assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "to-stderr\n", 0), result
    try:
        sbx.commands.run("echo partial; exit 3")
    except CommandExitException as error:
        assert error.exit_code == 3 and error.stdout == "partial\n", error
    else:
        raise AssertionError("exit 3 passed")
    result = sbx.commands.run("x='a b'; echo \"$x\" | wc -w && false || echo \"status $?\"")
    assert result.stdout == "2\nstatus 1\n", result.stdout


@check
def output_streams_while_the_command_runs():
    sbx = sandbox()
    seen = []
    sbx.commands.run("for i in 1 2 3; do echo $i; sleep 0.3; done", on_stdout=lambda line: seen.append((time.monotonic(), line)))
    assert [line for _, line in seen] == ["1\n", "2\n", "3\n"], seen
    assert seen[-1][0] - seen[0][0] > 0.4, f"the lines arrived together: {seen}"
    errors = []
    sbx.commands.run("echo oops >&2", on_stderr=errors.append)
    assert errors == ["oops\n"], errors


@check
def timeout_stops_the_command():
    sbx = sandbox()
    started = time.monotonic()
    try:
        sbx.commands.run("sleep 10; touch /home/user/slept", timeout=2)
    except TimeoutException:
        pass
    else:
        raise AssertionError("sleep 10 finished within a 2 s timeout")
    assert time.monotonic() - started < 6, "the timeout ended the wait"
    time.sleep(0.5)
    assert not sbx.files.exists("/home/user/slept"), "the command went on after its timeout"


@check
def stdin_streams_into_a_running_cat():
    sbx = sandbox()
    handle = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.send_stdin(handle.pid, "Hello, World!")
    for stdout, _, _ in handle:
        assert stdout == "Hello, World!", stdout
        break
    sbx.commands.send_stdin(handle.pid, "\nmore")
    sbx.commands.close_stdin(handle.pid)
    result = handle.wait()
    assert result.stdout == "Hello, World!\nmore", result.stdout


@check
def background_list_kill_and_connect():
    sbx = sandbox()
    sleeper = sbx.commands.run("sleep 30", background=True)
    assert sleeper.pid in [p.pid for p in sbx.commands.list()]
    assert sbx.commands.kill(sleeper.pid)
    try:
        sleeper.wait()
    except CommandExitException as error:
        assert error.exit_code != 0, error
    else:
        raise AssertionError("a killed command succeeded")
    assert sleeper.pid not in [p.pid for p in sbx.commands.list()]
    assert not sbx.commands.kill(999_999), "killing no process is False"
    late = sbx.commands.run("sleep 0.5; echo late", background=True)
    assert sbx.commands.connect(late.pid).wait().stdout == "late\n"


@check
def env_cwd_and_paths_agree_with_the_sdk():
    sbx = sandbox()
    result = sbx.commands.run("pwd; echo $HOME $USER $GREETING", envs={"GREETING": "hi"})
    assert result.stdout == "/home/user\n/home/user user hi\n", result.stdout
    sbx.files.make_dir("/home/user/work")
    assert sbx.commands.run("pwd", cwd="/home/user/work").stdout == "/home/user/work\n"
    assert sbx.commands.run("echo $HOME", user="root").stdout == "/root\n"


@check
def broken_utf8_is_replaced():
    sbx = sandbox()
    assert sbx.commands.run(r"printf 'a\xffb'").stdout == "a\ufffdb"


@check
def files_made_by_commands_are_the_sandboxes_files():
    sbx = sandbox()
    sbx.commands.run("mkdir -p notes && touch notes/empty.txt && echo text > notes/a.txt && ln -s a.txt notes/link.txt")
    assert sbx.files.read("/home/user/notes/a.txt") == "text\n"
    assert sbx.files.exists("/home/user/notes/empty.txt")
    info = sbx.files.get_info("/home/user/notes/link.txt")
    assert info.symlink_target == "a.txt", info
    sbx.files.write("/home/user/from-sdk.txt", "written by the SDK\n")
    assert sbx.commands.run("cat from-sdk.txt").stdout == "written by the SDK\n"


@check
def python_runs_in_the_shell_beside_the_kernel():
    sbx = sandbox()
    sbx.run_code("kept = 41")
    result = sbx.commands.run("python -c 'import sys; print(sys.argv[1:]); open(\"py.txt\", \"w\").write(\"py\")' a b")
    assert result.stdout == "['a', 'b']\n", result.stdout
    assert sbx.files.read("/home/user/py.txt") == "py"
    assert sbx.run_code("kept + 1").text == "42", "the kernel's state is not touched by a command"
    try:
        sbx.commands.run("python3 -c 'raise SystemExit(4)'")
    except CommandExitException as error:
        assert error.exit_code == 4, error
    else:
        raise AssertionError("exit 4 passed")


@check
def a_sandbox_killed_during_a_command():
    sbx = Sandbox.create(timeout=120)
    handle = sbx.commands.run("sleep 30", background=True)
    started = time.monotonic()
    threading.Timer(0.5, sbx.kill).start()
    try:
        handle.wait()
    except Exception:
        pass
    else:
        raise AssertionError("the command outlived its sandbox")
    assert time.monotonic() - started < 20


@check
def attacks_are_contained():
    sbx = sandbox()
    # Boundary: a fork bomb ends (no processes to fork; the shell's limits stop the recursion).
    try:
        sbx.commands.run(":(){ :|:& };:", timeout=30)
    except (CommandExitException, TimeoutException):
        pass
    # Boundary: unbounded output stops at the output cap.
    try:
        result = sbx.commands.run("yes", timeout=30)
        assert len(result.stdout) <= 2 << 20, len(result.stdout)
    except (CommandExitException, TimeoutException):
        pass
    try:
        sbx.commands.run("head -c 100000000 /dev/zero | wc -c", timeout=30)
    except (CommandExitException, TimeoutException):
        pass
    # Boundary: the tree's root is the root; a symlink to a host file reads nothing of the host.
    result = sbx.commands.run("cd /../../..; pwd; ln -s /etc/shadow s; cat s; cat /etc/passwd; true")
    assert result.stdout.startswith("/\n"), result.stdout
    assert "root:" not in result.stdout, result.stdout
    # Boundary: no network, Python's sockets included.
    try:
        sbx.commands.run("python -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'")
    except CommandExitException as error:
        assert "Error" in error.stderr or "error" in error.stderr, error.stderr
    else:
        raise AssertionError("a socket connected")
    # The sandbox still works.
    assert sbx.commands.run("echo alive").stdout == "alive\n"
    assert sbx.run_code("1 + 1").text == "2"


@check
def shell_escapes_in_cells():
    sbx = sandbox()
    execution = sbx.run_code("!pwd")
    assert "".join(execution.logs.stdout).strip() == "/home/user", execution
    execution = sbx.run_code("name = 'world'\n!echo hello {name} $name $HOME\nfiles = !ls -1 /home/user\nprint(type(files).__name__)")
    assert execution.error is None, execution.error
    assert "".join(execution.logs.stdout) == "hello world world /home/user\nlist\n", execution.logs.stdout
    streamed = []
    sbx.run_code("!for i in 1 2; do echo $i; done", on_stdout=lambda out: streamed.append(out.line))
    assert "".join(streamed) == "1\n2\n", streamed
    execution = sbx.run_code("echo from bash; echo $((2 + 3))", language="bash")
    assert "".join(execution.logs.stdout) == "from bash\n5\n", execution.logs.stdout
    execution = sbx.run_code("%%bash\ncd /tmp && pwd")
    assert "".join(execution.logs.stdout) == "/tmp\n", execution.logs.stdout
    execution = sbx.run_code("!false\nafter = 1\nafter")
    assert execution.text == "1", "a failing command does not end the cell"


@check
def pip_installs_from_the_wheelhouse():
    sbx = sandbox()
    execution = sbx.run_code("!pip install python-slugify")
    assert execution.error is None, execution.error
    assert "Successfully installed text-unidecode-1.3 python-slugify-9.2.0" in "".join(execution.logs.stdout), execution.logs
    execution = sbx.run_code("import slugify\nprint(slugify.slugify('A b'))")
    assert execution.error is None and "".join(execution.logs.stdout) == "a-b\n", execution
    # The data runtime bundles numpy and tabulate: pip says so.
    execution = sbx.run_code("%pip install numpy tabulate")
    stdout = "".join(execution.logs.stdout)
    assert "Requirement already satisfied: numpy" in stdout and "Requirement already satisfied: tabulate" in stdout, execution.logs
    result = sbx.commands.run("pip install python-slugify")
    assert "Requirement already satisfied: python-slugify" in result.stdout, result.stdout
    try:
        sbx.commands.run("pip install not-in-the-wheelhouse")
    except CommandExitException as error:
        assert error.exit_code == 1, error
        assert "No matching distribution found for not-in-the-wheelhouse" in error.stderr and "no network" in error.stderr, error.stderr
    else:
        raise AssertionError("a package nowhere was installed")
    # What pip installed is in the sandbox's files.
    assert any(entry.name == "slugify" for entry in sbx.files.list("/home/user/.local/lib/python3.15/site-packages")), "listed by files"


def main():
    run_checks(sys.argv[3:])


main()
