"""E2B's Python SDK (`e2b-code-interpreter`, pinned by `cargo xtask test`)
against anypath's E2B API, as an agent builder's code would use it.

Usage: e2b_sdk_checks.py API_URL KEY OTHER_KEY [CHECK ...]

API_URL serves both the control plane and the sandboxes (`E2B_API_URL`
and `E2B_SANDBOX_URL`); KEY and OTHER_KEY belong to two tenants. Each check
is one behaviour of E2B's own test suites (e2b-dev/code-interpreter's
python/tests, e2b-dev/E2B's sandbox tests) that needs neither a language
other than Python nor the network (commands are `e2b_commands_checks.py`'s).
Every check runs, failed or not; each prints `PASS name` or `FAIL name` with its traceback, and the
exit status is 1 when any failed.
"""

import gzip
import sys
import threading
import time

import httpx

API_URL, KEY, OTHER_KEY = sys.argv[1], sys.argv[2], sys.argv[3]

import os

os.environ["E2B_API_URL"] = API_URL
os.environ["E2B_SANDBOX_URL"] = API_URL
os.environ["E2B_API_KEY"] = KEY

from e2b import FileType, NotFoundException, SandboxQuery, SandboxState, TimeoutException  # noqa: E402
from e2b.exceptions import AuthenticationException, SandboxException  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402
from sdk_checks import SANDBOXES, check, run_checks  # noqa: E402


def sandbox(**options):
    """A new sandbox, killed when the checks end."""
    options.setdefault("timeout", 120)
    options.setdefault("metadata", {"suite": "e2b_sdk_checks"})
    created = Sandbox.create(**options)
    SANDBOXES.append(created)
    return created


@check
def basic():
    sbx = sandbox()
    assert sbx.run_code("x =1; x").text == "1"
    assert sbx.is_running()


@check
def secure_sandbox():
    sbx = sandbox(secure=True)
    assert sbx.run_code("x =1; x").text == "1"
    # Boundary: envd and /execute refuse a call without the sandbox's token.
    headers = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49999"}
    refused = httpx.post(f"{API_URL}/execute", json={"code": "1"}, headers=headers)
    assert refused.status_code == 401, refused.text
    wrong = httpx.post(f"{API_URL}/execute", json={"code": "1"}, headers={**headers, "X-Access-Token": "wrong"})
    assert wrong.status_code == 401, wrong.text
    listing = httpx.post(f"{API_URL}/filesystem.Filesystem/ListDir", json={"path": "/home/user"}, headers={**headers, "Connect-Protocol-Version": "1"})
    assert listing.status_code == 401, listing.text


@check
def statefulness():
    sbx = sandbox()
    sbx.run_code("test_stateful = 1")
    assert sbx.run_code("test_stateful+=1; test_stateful").text == "2"


@check
def callbacks():
    sbx = sandbox()
    results, errors, stdout, stderr = [], [], [], []
    execution = sbx.run_code("x = 1;x", on_result=results.append)
    assert len(results) == 1 and execution.results[0].text == "1"
    execution = sbx.run_code("xyz", on_error=errors.append)
    assert len(errors) == 1 and execution.error.name == "NameError"
    execution = sbx.run_code("print('Hello from e2b')", on_stdout=stdout.append)
    assert len(stdout) == 1, stdout
    assert execution.logs.stdout == ["Hello from e2b\n"]
    execution = sbx.run_code('import sys;print("This is an error message", file=sys.stderr)', on_stderr=stderr.append)
    assert len(stderr) == 1 and execution.logs.stderr == ["This is an error message\n"]


@check
def output_arrives_while_the_code_runs():
    sbx = sandbox()
    seen = []
    started = time.monotonic()
    sbx.run_code("import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')", on_stdout=lambda m: seen.append((time.monotonic() - started, m.line)))
    ended = time.monotonic() - started
    assert [line for _, line in seen] == ["first\n", "second\n"], seen
    assert seen[0][0] < ended - 1.0, f"the first line came at {seen[0][0]:.2f} s of {ended:.2f} s"


@check
def dataframe_data_and_html():
    sbx = sandbox()
    # Indented inside its string, as E2B's own tests send it.
    result = sbx.run_code(
        """
        import pandas as pd
        pd.DataFrame({"a": [1, 2, 3]})
        """
    ).results[0]
    assert result.data and "a" in result.data and len(result.data["a"]) == 3, result.data
    assert result.html and "<table" in result.html
    assert result.is_main_result


@check
def figure_png_and_chart():
    sbx = sandbox()
    code = "import matplotlib.pyplot as plt\nimport numpy as np\nx = np.linspace(0, 20, 100)\nplt.plot(x, np.sin(x))\nplt.title('Sine')\nplt.show()"
    result = sbx.run_code(code).results[0]
    assert result.png and result.text and not result.extra, result.formats()
    assert result.chart is not None, result.formats()
    assert result.chart.type.value == "line" and result.chart.title == "Sine", result.chart.to_dict()
    assert len(result.chart.elements) == 1 and len(result.chart.elements[0].points) == 100


@check
def error_traceback():
    sbx = sandbox()
    execution = sbx.run_code("def f():\n    return 1 / 0\nf()")
    assert execution.error.name == "ZeroDivisionError", execution.error
    assert execution.error.value == "division by zero"
    assert "ZeroDivisionError" in execution.error.traceback and "f()" in execution.error.traceback


@check
def execution_count_includes_failures():
    sbx = sandbox()
    sbx.run_code("1")
    sbx.run_code("raise ValueError('x')")
    assert sbx.run_code("2").execution_count == 3


@check
def env_vars():
    sbx = sandbox(envs={"TEST_ENV_VAR": "supertest"})
    assert sbx.run_code("import os; os.getenv('TEST_ENV_VAR')").text == "supertest"
    assert sbx.run_code("import os; os.getenv('TEST_ENV_VAR')", envs={"TEST_ENV_VAR": "overwrite"}).text == "overwrite"
    assert sbx.run_code("import os; os.getenv('FOO')", envs={"FOO": "bar"}).text == "bar"
    assert sbx.run_code("import os; os.getenv('FOO', 'default')").text == "default"
    assert sbx.run_code("import os; os.getenv('TEST_ENV_VAR')").text == "supertest"


@check
def contexts():
    sbx = sandbox()
    context = sbx.create_code_context()
    listed = sbx.list_code_contexts()
    assert listed[-1].id == context.id and listed[-1].language == context.language == "python"
    assert listed[-1].cwd == context.cwd
    sbx.run_code("x = 1")
    independent = sbx.run_code("x", context=context)
    assert independent.error is not None and independent.error.value == "name 'x' is not defined"
    # The same files: written by one context, read by the other.
    sbx.run_code("open('shared.txt', 'w').write('from the default context')")
    assert sbx.run_code("open('shared.txt').read()", context=context).text == "from the default context"
    with_options = sbx.create_code_context(language="python", cwd="/root")
    assert sbx.list_code_contexts()[-1].cwd == "/root" == with_options.cwd
    sbx.run_code("y = 1", context=context)
    sbx.restart_code_context(context.id)
    restarted = sbx.run_code("y", context=context)
    assert restarted.error is not None and restarted.error.name == "NameError"
    sbx.remove_code_context(context.id)
    assert context.id not in [c.id for c in sbx.list_code_contexts()]
    assert sbx.run_code("x").text == "1", "the default context kept its state"


@check
def other_languages_are_refused():
    sbx = sandbox()
    try:
        sbx.run_code("cat('hi')", language="r")
    except SandboxException as error:
        assert "'r' is not available" in str(error), error
    else:
        raise AssertionError("R ran")
    try:
        sbx.create_code_context(language="r")
    except SandboxException as error:
        assert "'r' is not available" in str(error), error
    else:
        raise AssertionError("an R context was made")


@check
def files():
    sbx = sandbox()
    info = sbx.files.write("/home/user/notes/a.txt", "hello")
    assert info.path == "/home/user/notes/a.txt" and info.name == "a.txt"
    assert sbx.files.read("/home/user/notes/a.txt") == "hello"
    assert sbx.files.read("notes/a.txt", format="bytes") == bytearray(b"hello")
    assert sbx.run_code("open('notes/a.txt').read()").text == "hello", "the code sees the files in its working directory"
    sbx.run_code("open('/mnt/data/made.txt', 'w').write('by code')")
    assert sbx.files.read("/home/user/made.txt") == "by code"
    sbx.files.write_files([{"path": "/home/user/m1.txt", "data": "1"}, {"path": "/home/user/m2.bin", "data": b"\x00\x01"}])
    assert sbx.files.read("m2.bin", format="bytes") == bytearray(b"\x00\x01")
    sbx.files.write("/home/user/big.txt", "z" * 100_000, gzip=True)
    assert sbx.files.read("/home/user/big.txt") == "z" * 100_000
    assert sbx.files.exists("/home/user/notes/a.txt") and not sbx.files.exists("/home/user/nope.txt")
    assert sbx.files.make_dir("/home/user/dir/sub") is True
    assert sbx.files.make_dir("/home/user/dir/sub") is False
    names = {entry.name: entry.type for entry in sbx.files.list("/home/user")}
    assert names.get("notes") == FileType.DIR and names.get("made.txt") == FileType.FILE, names
    deep = [entry.path for entry in sbx.files.list("/home/user/dir", depth=2)]
    assert deep == ["/home/user/dir/sub"], deep
    stat = sbx.files.get_info("/home/user/notes/a.txt")
    assert stat.size == 5 and stat.type == FileType.FILE
    moved = sbx.files.rename("/home/user/notes/a.txt", "/home/user/notes/b.txt")
    assert moved.path == "/home/user/notes/b.txt" and sbx.files.read("/home/user/notes/b.txt") == "hello"
    sbx.files.remove("/home/user/notes")
    assert not sbx.files.exists("/home/user/notes/b.txt")
    try:
        sbx.files.read("/home/user/missing.txt")
    except NotFoundException:
        pass
    else:
        raise AssertionError("a missing file was read")
    # Boundary: every path is the sandbox's own tree, whose root `..` never
    # climbs above: it has no /etc/passwd, and the host's is never read.
    for outside in ["/etc/passwd", "/home/user/../../etc/passwd"]:
        try:
            sbx.files.read(outside)
        except NotFoundException:
            pass
        else:
            raise AssertionError(f"{outside} was read")


@check
def watch_dir():
    sbx = sandbox()
    handle = sbx.files.watch_dir("/home/user")
    sbx.files.write("/home/user/watched.txt", "1")
    sbx.run_code("open('by_code.txt', 'w').write('2')")
    events = handle.get_new_events()
    created = {event.name for event in events if event.type.value == "create"}
    assert {"watched.txt", "by_code.txt"} <= created, events
    handle.stop()


@check
def signed_links():
    sbx = sandbox(secure=True)
    sbx.files.write("/home/user/report.csv", "a,b\n1,2\n")
    download = httpx.get(sbx.download_url("/home/user/report.csv"))
    assert download.status_code == 200 and download.text == "a,b\n1,2\n", download.text
    expiring = httpx.get(sbx.download_url("/home/user/report.csv", use_signature_expiration=60))
    assert expiring.status_code == 200
    upload = httpx.post(sbx.upload_url("/home/user/up.txt"), files={"file": ("up.txt", b"uploaded")})
    assert upload.status_code == 200, upload.text
    assert sbx.files.read("/home/user/up.txt") == "uploaded"
    # Boundary: a link for one path or operation opens nothing else.
    url = sbx.download_url("/home/user/report.csv")
    assert httpx.get(url.replace("report.csv", "up.txt")).status_code == 401
    assert httpx.post(url, files={"file": ("x", b"x")}).status_code == 401


@check
def timeout_info_and_list():
    sbx = sandbox(metadata={"suite": "e2b_sdk_checks", "owner": "list-check"})
    info = sbx.get_info()
    assert info.sandbox_id == sbx.sandbox_id and info.metadata["owner"] == "list-check"
    assert info.state == SandboxState.RUNNING and info.template_id == "code-interpreter-v1"
    sbx.set_timeout(600)
    assert (sbx.get_info().end_at - info.started_at).total_seconds() > 590
    other = sandbox(metadata={"owner": "list-check"})
    paginator = Sandbox.list(query=SandboxQuery(metadata={"owner": "list-check"}), limit=1)
    seen = []
    while paginator.has_next:
        page = paginator.next_items()
        assert len(page) <= 1
        seen.extend(s.sandbox_id for s in page)
    assert sorted(seen) == sorted([sbx.sandbox_id, other.sandbox_id]), seen


@check
def list_order_paging_and_filters():
    tag = f"order-{time.time_ns()}"
    older = sandbox(metadata={"owner": tag})
    newer = sandbox(metadata={"owner": tag})
    query = SandboxQuery(metadata={"owner": tag})
    # E2B lists newest first, and pages go on from where the last one ended.
    paginator = Sandbox.list(query=query, limit=1)
    first = paginator.next_items()
    assert [s.sandbox_id for s in first] == [newer.sandbox_id] and paginator.has_next, first
    second = paginator.next_items()
    assert [s.sandbox_id for s in second] == [older.sandbox_id] and not paginator.has_next, second
    ascending = Sandbox.list(query=query, order="asc").next_items()
    assert [s.sandbox_id for s in ascending] == [older.sandbox_id, newer.sandbox_id], ascending
    older.pause()
    paused = Sandbox.list(query=SandboxQuery(metadata={"owner": tag}, state=[SandboxState.PAUSED])).next_items()
    assert [(s.sandbox_id, s.state) for s in paused] == [(older.sandbox_id, SandboxState.PAUSED)], paused
    running = Sandbox.list(query=SandboxQuery(metadata={"owner": tag}, state=[SandboxState.RUNNING])).next_items()
    assert [s.sandbox_id for s in running] == [newer.sandbox_id], running
    both = Sandbox.list(query=SandboxQuery(metadata={"owner": tag}, state=[SandboxState.RUNNING, SandboxState.PAUSED]), limit=1)
    assert [s.sandbox_id for s in both.next_items()] == [newer.sandbox_id]
    assert [s.sandbox_id for s in both.next_items()] == [older.sandbox_id] and not both.has_next
    info = newer.get_info()
    later = Sandbox.list(query=SandboxQuery(metadata={"owner": tag}, started_after=info.started_at)).next_items()
    assert [s.sandbox_id for s in later] == [newer.sandbox_id], later
    assert Sandbox.list(query=SandboxQuery(metadata={"owner": tag}, template="unknown-template")).next_items() == []


@check
def snapshots():
    source = sandbox()
    source.run_code("state = {'n': 41}")
    source.files.make_dir("/home/user/app")
    source.files.write("/home/user/app/config.json", '{"env": "test"}')
    snapshot = source.create_snapshot()
    assert snapshot.snapshot_id and snapshot.names == [], snapshot
    # The source runs on, and what it does next is not in the snapshot.
    assert source.is_running() and source.run_code("state['n']").text == "41"
    source.run_code("state['n'] = 0")
    source.files.write("/home/user/app/config.json", "changed")
    one, two = sandbox(template=snapshot.snapshot_id), sandbox(template=snapshot.snapshot_id)
    assert one.sandbox_id != two.sandbox_id
    assert one.run_code("state['n'] + 1").text == "42", "the live state came along"
    assert one.files.exists("/home/user/app")
    assert one.files.read("/home/user/app/config.json") == '{"env": "test"}'
    one.files.write("/home/user/app/config.json", "one's")
    one.run_code("state['n'] = 1")
    assert two.files.read("/home/user/app/config.json") == '{"env": "test"}', "each sandbox has its own copy"
    assert two.run_code("state['n']").text == "41"
    mine = [s.snapshot_id for s in Sandbox.list_snapshots(sandbox_id=source.sandbox_id).next_items()]
    assert mine == [snapshot.snapshot_id], mine
    # Named, by the class method: the name finds it, and a sandbox starts from the name.
    name = f"snap-{time.time_ns()}"
    named = Sandbox.create_snapshot(source.sandbox_id, name=name)
    assert name in named.names, named
    assert [s.snapshot_id for s in Sandbox.list_snapshots(name=name).next_items()] == [named.snapshot_id]
    assert Sandbox.list_snapshots(name=f"{name}-does-not-exist").next_items() == []
    assert sandbox(template=name).run_code("state['n']").text == "0"
    # Newest first, paged.
    paginator = Sandbox.list_snapshots(sandbox_id=source.sandbox_id, limit=1)
    pages = [paginator.next_items()]
    assert paginator.has_next
    pages.append(paginator.next_items())
    assert [[s.snapshot_id for s in page] for page in pages] == [[named.snapshot_id], [snapshot.snapshot_id]], pages
    assert not paginator.has_next
    # A name moves to a later snapshot given it.
    renamed = source.create_snapshot(name=name)
    assert [s.snapshot_id for s in Sandbox.list_snapshots(name=name).next_items()] == [renamed.snapshot_id]
    # Boundary: another tenant neither lists, starts from nor deletes it.
    theirs = Sandbox.list_snapshots(api_key=OTHER_KEY).next_items()
    assert snapshot.snapshot_id not in [s.snapshot_id for s in theirs]
    try:
        Sandbox.create(snapshot.snapshot_id, api_key=OTHER_KEY)
    except SandboxException:
        pass
    else:
        raise AssertionError("another tenant started a sandbox from the snapshot")
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, api_key=OTHER_KEY) is False
    # Snapshots outlive their sandbox; deleted, they are gone.
    source.kill()
    assert sandbox(template=snapshot.snapshot_id).run_code("state['n']").text == "41"
    assert Sandbox.delete_snapshot(snapshot.snapshot_id) is True
    assert Sandbox.delete_snapshot(snapshot.snapshot_id) is False
    try:
        Sandbox.create(snapshot.snapshot_id)
    except SandboxException:
        pass
    else:
        raise AssertionError("a deleted snapshot made a sandbox")
    for kept in (named, renamed):
        assert Sandbox.delete_snapshot(kept.snapshot_id) is True


@check
def expiry():
    sbx = Sandbox.create(timeout=2)
    time.sleep(3.5)
    assert not sbx.is_running()
    try:
        sbx.get_info()
    except NotFoundException:
        pass
    else:
        raise AssertionError("an expired sandbox is still listed")


@check
def pause_and_connect():
    sbx = sandbox()
    sbx.run_code("kept = [1, 2, 3]")
    sbx.files.write("/home/user/kept.txt", "file")
    sbx.pause()
    assert not sbx.is_running()
    assert sbx.get_info().state == SandboxState.PAUSED
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert resumed.is_running()
    assert resumed.run_code("sum(kept)").text == "6"
    assert resumed.files.read("/home/user/kept.txt") == "file"
    again = Sandbox.connect(sbx.sandbox_id)
    assert again.run_code("len(kept)").text == "3", "connecting to a running sandbox keeps it as it is"


BOOT_ID = "/proc/sys/kernel/random/boot_id"


@check
def pause_keeping_only_the_files():
    """E2B's filesystem-only pause: the files stay, the Python state does
    not, and the sandbox boots afresh (a new boot id, which a pause that
    keeps the memory leaves as it was)."""
    sbx = sandbox()
    sbx.run_code("kept = 42")
    sbx.files.write("/home/user/marker.txt", "persisted")
    booted = sbx.files.read(BOOT_ID).strip()
    assert len(booted) == 36 and booted == sbx.run_code(f"open({BOOT_ID!r}).read().strip()").text, booted
    sbx.pause()
    same = Sandbox.connect(sbx.sandbox_id)
    assert same.files.read(BOOT_ID).strip() == booted, "a pause that kept the memory is no new boot"
    assert same.run_code("kept").text == "42"
    assert same.pause(keep_memory=False)
    assert not same.is_running()
    rebooted = Sandbox.connect(sbx.sandbox_id)
    assert rebooted.files.read("/home/user/marker.txt") == "persisted"
    assert rebooted.files.read(BOOT_ID).strip() != booted, "a filesystem-only pause boots afresh"
    assert rebooted.run_code("kept").error.name == "NameError", "the Python state is gone"


@check
def auto_pause_keeping_only_the_files():
    sbx = sandbox(timeout=2, lifecycle={"on_timeout": {"action": "pause", "keep_memory": False}})
    sbx.run_code("kept = 42")
    booted = sbx.files.read(BOOT_ID)
    time.sleep(3.5)
    assert sbx.get_info().state == SandboxState.PAUSED
    resumed = sbx.connect()
    assert resumed.files.read(BOOT_ID) != booted
    assert resumed.run_code("kept").error.name == "NameError"


@check
def metrics():
    began = time.time()
    sbx = sandbox()
    sbx.run_code("import pandas as pd\nframe = pd.DataFrame({'x': range(10_000)})")
    sbx.files.write("/home/user/data.csv", "x" * 5000)
    samples = sbx.get_metrics()
    assert len(samples) == 1, samples
    sample = samples[0]
    assert sample.cpu_count == 1 and sample.cpu_used_pct == 0, sample
    assert 0 < sample.mem_used <= sample.mem_total, sample
    assert 5000 <= sample.disk_used <= sample.disk_total, sample
    assert began - 1 <= sample.timestamp.timestamp() <= time.time() + 1, sample
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc)
    assert len(sbx.get_metrics(start=now - datetime.timedelta(seconds=5), end=now)) == 1
    before = sbx.get_metrics(start=now - datetime.timedelta(hours=1), end=now - datetime.timedelta(minutes=30))
    assert before == [], "nothing is made up for a window before the sandbox"


@check
def fork():
    sbx = sandbox()
    sbx.run_code("value = 41")
    sbx.files.write("/home/user/f.txt", "parent")
    children = sbx.fork(count=2)
    SANDBOXES.extend(children)
    assert len(children) == 2 and all(isinstance(c, Sandbox) for c in children), children
    child = children[0]
    assert child.sandbox_id != sbx.sandbox_id != children[1].sandbox_id
    assert children[1].run_code("value").text == "41"
    assert child.run_code("value + 1").text == "42"
    child.run_code("value = 0")
    child.files.write("/home/user/f.txt", "child")
    assert sbx.run_code("value").text == "41" and sbx.files.read("/home/user/f.txt") == "parent"


@check
def kill():
    sbx = Sandbox.create()
    assert sbx.kill() is True
    assert not sbx.is_running()
    assert Sandbox.kill(sbx.sandbox_id) is False
    try:
        sbx.run_code("1")
    except SandboxException:
        pass
    else:
        raise AssertionError("a killed sandbox ran code")


@check
def killed_during_execution():
    sbx = Sandbox.create()
    timer = threading.Timer(2.0, sbx.kill)
    timer.start()
    try:
        sbx.run_code("import time; time.sleep(300)", timeout=300)
    except TimeoutException as error:
        assert "sandbox was killed while the request was in progress" in str(error), error
    else:
        raise AssertionError("the run outlived its sandbox")
    finally:
        timer.cancel()


@check
def subsequent_execution_works_after_client_timeout():
    """E2B's own test (`test_subsequent_execution_works_after_client_timeout`):
    a client that times out interrupts its run, as E2B's server does, so
    the context's next run answers at once instead of waiting behind it."""
    sbx = sandbox()
    try:
        sbx.run_code("import time; time.sleep(300)", timeout=3)
    except TimeoutException:
        pass
    else:
        raise AssertionError("a 300 s sleep finished in 3 s")
    started = time.monotonic()
    assert sbx.run_code("1 + 1", timeout=30).text == "2"
    assert time.monotonic() - started < 10, f"the next run waited {time.monotonic() - started:.1f} s"


@check
def tenants_never_meet():
    sbx = sandbox()
    # Boundary: another tenant's key finds neither the sandbox nor its list entry.
    try:
        Sandbox.connect(sbx.sandbox_id, api_key=OTHER_KEY)
    except NotFoundException:
        pass
    else:
        raise AssertionError("another tenant connected")
    theirs = Sandbox.list(api_key=OTHER_KEY).next_items()
    assert sbx.sandbox_id not in [s.sandbox_id for s in theirs]
    try:
        Sandbox.create(api_key="e2b_0000")
    except AuthenticationException as error:
        assert "API key" in str(error), error
    else:
        raise AssertionError("an unknown key made a sandbox")


@check
def unknown_template():
    try:
        Sandbox.create("no-such-template")
    except SandboxException as error:
        assert "code-interpreter-v1" in str(error), error
    else:
        raise AssertionError("an unknown template made a sandbox")


def main():
    run_checks(sys.argv[4:])

main()
