"""E2B's Python SDK (`e2b-code-interpreter`) against anypath's E2B API: the
sandbox's files as envd serves them, each check one behaviour of E2B's own
file tests (e2b-dev/E2B's packages/python-sdk/tests/sync/sandbox_sync/files,
e2b-dev/code-interpreter's python tests).

Usage: e2b_files_checks.py API_URL KEY [CHECK ...]

Every check runs, failed or not; each prints `PASS name` or `FAIL name`
with its traceback, and the exit status is 1 when any failed.
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

API_URL, KEY = sys.argv[1], sys.argv[2]

os.environ["E2B_API_URL"] = API_URL
os.environ["E2B_SANDBOX_URL"] = API_URL
os.environ["E2B_API_KEY"] = KEY

from e2b import FilesystemEventType, FileType, NotFoundException  # noqa: E402
from e2b.sandbox.filesystem.filesystem import WriteEntry  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402
from sdk_checks import SANDBOXES, check, run_checks  # noqa: E402

# The sandbox user root's home.
ROOT_HOME = "/root"


def sandbox(**options):
    """A new sandbox, killed when the checks end."""
    options.setdefault("timeout", 120)
    created = Sandbox.create(**options)
    SANDBOXES.append(created)
    return created


def timed(action):
    """`action()`'s value and how long it took, in seconds."""
    started = time.monotonic()
    value = action()
    return value, time.monotonic() - started


@check
def metadata_written_kept_on_rename_and_cleared_on_overwrite():
    sbx = sandbox()
    metadata = {"author": "mish", "purpose": "upload"}
    for name, octet in [("multipart.txt", False), ("octet.txt", True)]:
        info = sbx.files.write(name, "with metadata", metadata=metadata, use_octet_stream=octet)
        assert info.metadata == metadata, info
        assert sbx.files.get_info(name).metadata == metadata, name
    assert sbx.files.write("plain.txt", "none").metadata is None
    assert sbx.files.get_info("plain.txt").metadata is None
    infos = sbx.files.write_files([WriteEntry(path="m1.txt", data="1"), WriteEntry(path="m2.txt", data="2")], metadata={"source": "suite"})
    assert [i.metadata for i in infos] == [{"source": "suite"}] * 2, infos
    assert sbx.files.get_info("m2.txt").metadata == {"source": "suite"}
    sbx.files.make_dir("listed")
    sbx.files.write("listed/a.txt", "content", metadata={"tag": "listed"})
    listed = {e.name: e.metadata for e in sbx.files.list("listed")}
    assert listed == {"a.txt": {"tag": "listed"}}, listed
    sbx.files.write("old.txt", "content", metadata={"stage": "renamed"})
    assert sbx.files.rename("old.txt", "new.txt").metadata == {"stage": "renamed"}
    assert sbx.files.get_info("new.txt").metadata == {"stage": "renamed"}
    sbx.files.write("over.txt", "first", metadata={"author": "mish"})
    assert sbx.files.write("over.txt", "second").metadata is None, "a write replaces the file's metadata"
    assert sbx.files.get_info("over.txt").metadata is None
    assert sbx.files.read("over.txt") == "second"


@check
def modes_are_permission_bits():
    sbx = sandbox()
    sbx.files.write("test_file.txt", "test")
    info = sbx.files.get_info("test_file.txt")
    assert (info.name, info.type, info.path, info.size) == ("test_file.txt", FileType.FILE, "/home/user/test_file.txt", 4), info
    assert (info.mode, info.permissions, info.owner, info.group) == (0o644, "-rw-r--r--", "user", "user"), info
    assert info.modified_time is not None and info.modified_time.tzinfo is not None
    sbx.files.make_dir("test_dir/inner")
    for folder in ["test_dir", "test_dir/inner"]:
        info = sbx.files.get_info(folder)
        assert (info.type, info.mode, info.permissions) == (FileType.DIR, 0o755, "drwxr-xr-x"), info
        assert info.size > 0, info
    listed = {e.name: e.mode for e in sbx.files.list("/home/user")}
    assert listed["test_file.txt"] == 0o644 and listed["test_dir"] == 0o755, listed


@check
def removing_what_is_not_there_is_quiet():
    sbx = sandbox()
    sbx.files.remove("non_existing_file.txt")
    sbx.files.remove("/home/user/no/such/dir")
    sbx.files.write("test_remove.txt", "This file will be removed.")
    sbx.files.remove("test_remove.txt")
    assert not sbx.files.exists("test_remove.txt")


@check
def an_expired_signature_is_refused_in_envds_words():
    sbx = sandbox(secure=True)
    sbx.files.write("signed.txt", "This file will be watched.")
    with urllib.request.urlopen(sbx.download_url("signed.txt", "user", 120)) as answer:
        assert answer.status == 200 and answer.read() == b"This file will be watched."
    try:
        urllib.request.urlopen(sbx.download_url("signed.txt", "user", use_signature_expiration=-120))
    except urllib.error.HTTPError as error:
        assert error.code == 401, error.code
        assert json.loads(error.read().decode()) == {"code": 401, "message": "signature is already expired"}
    else:
        raise AssertionError("an expired link was followed")


@check
def watch_events_carry_their_entry():
    sbx = sandbox()
    sbx.files.make_dir("test_watch_dir_entry")
    sbx.files.write("test_watch_dir_entry/test_watch.txt", "This file will be watched.")
    handle = sbx.files.watch_dir("test_watch_dir_entry", include_entry=True)
    sbx.files.write("test_watch_dir_entry/test_watch.txt", "This file has been modified.")
    events = handle.get_new_events()
    writes = [e for e in events if e.type == FilesystemEventType.WRITE and e.name == "test_watch.txt"]
    assert writes, events
    entry = writes[0].entry
    assert entry is not None and entry.name == "test_watch.txt" and entry.type == FileType.FILE, entry
    assert entry.path == "/home/user/test_watch_dir_entry/test_watch.txt", entry.path
    handle.stop()
    mounts = sbx.files.watch_dir("test_watch_dir_entry", allow_network_mounts=True)
    sbx.files.write("test_watch_dir_entry/test_watch.txt", "again")
    assert any(e.type == FilesystemEventType.WRITE for e in mounts.get_new_events())
    mounts.stop()


@check
def recursive_watch_sees_every_event_in_new_subfolders():
    sbx = sandbox()
    sbx.files.make_dir("test_recursive_watch_dir/test_nested_watch_dir")
    handle = sbx.files.watch_dir("test_recursive_watch_dir", recursive=True)
    sbx.files.write("test_recursive_watch_dir/test_nested_watch_dir/test_watch.txt", "This file will be watched.")
    events = handle.get_new_events()
    assert len(events) == 3, events
    assert events[0].type == FilesystemEventType.CREATE and events[0].name == "test_nested_watch_dir/test_watch.txt", events
    handle.stop()

    sbx.files.make_dir("test_recursive_watch_dir_add")
    handle = sbx.files.watch_dir("test_recursive_watch_dir_add", recursive=True)
    sbx.files.make_dir("test_recursive_watch_dir_add/test_nested_watch_dir")
    sbx.files.write("test_recursive_watch_dir_add/test_nested_watch_dir/test_watch.txt", "content")
    # A folder the code makes, with a file in it, between two looks.
    sbx.run_code("import os\nos.makedirs('test_recursive_watch_dir_add/by_code/deeper')\nopen('test_recursive_watch_dir_add/by_code/deeper/f.txt', 'w').write('x')")
    seen = {(e.type, e.name) for e in handle.get_new_events()}
    for wanted in [
        (FilesystemEventType.CREATE, "test_nested_watch_dir"),
        (FilesystemEventType.CREATE, "test_nested_watch_dir/test_watch.txt"),
        (FilesystemEventType.WRITE, "test_nested_watch_dir/test_watch.txt"),
        (FilesystemEventType.CREATE, "by_code/deeper"),
        (FilesystemEventType.CREATE, "by_code/deeper/f.txt"),
        (FilesystemEventType.WRITE, "by_code/deeper/f.txt"),
    ]:
        assert wanted in seen, (wanted, seen)
    handle.stop()

    sbx.files.make_dir("test_watch_dir_iterated")
    handle = sbx.files.watch_dir("test_watch_dir_iterated")
    sbx.files.write("test_watch_dir_iterated/f.txt", "new")
    assert len(handle.get_new_events()) == 3
    sbx.files.write("test_watch_dir_iterated/f.txt", "changed")
    assert any(e.type == FilesystemEventType.WRITE and e.name == "f.txt" for e in handle.get_new_events())
    handle.stop()


@check
def files_are_served_while_a_cell_runs():
    sbx = sandbox()
    # The cell waits for a file the SDK writes while it runs, then reads it.
    code = (
        "import os, time\n"
        "deadline = time.time() + 30\n"
        "while not os.path.exists('/home/user/during.txt') and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(1)\n"
        "open('during.txt').read()"
    )
    outcome = {}
    running = threading.Thread(target=lambda: outcome.setdefault("execution", sbx.run_code(code, timeout=60)))
    running.start()
    time.sleep(1.5)
    for path, action in [
        ("write", lambda: sbx.files.write("other.txt", "written while the cell ran")),
        ("read", lambda: sbx.files.read("other.txt")),
        ("list", lambda: sbx.files.list("/home/user")),
        ("make_dir", lambda: sbx.files.make_dir("made_meanwhile")),
        ("rename", lambda: sbx.files.rename("other.txt", "renamed.txt")),
        ("remove", lambda: sbx.files.remove("renamed.txt")),
        ("signal", lambda: sbx.files.write("during.txt", "seen by the cell")),
    ]:
        _, took = timed(action)
        assert took < 2.0, f"{path} took {took:.2f} s while a cell ran"
    assert running.is_alive(), "the cell was still running while the files were served"
    running.join(60)
    execution = outcome["execution"]
    assert execution.error is None, execution.error
    assert execution.text == "seen by the cell", execution.text


@check
def parallel_uploads_all_land():
    sbx = sandbox()
    sleeping = threading.Thread(target=lambda: sbx.run_code("import time; time.sleep(4)", timeout=60))
    sleeping.start()
    time.sleep(1)
    errors = []

    def upload(n):
        try:
            sbx.files.write(f"parallel/{n}.txt", f"file {n}" * 1000)
        except Exception as error:  # reported below
            errors.append(repr(error))

    uploads = [threading.Thread(target=upload, args=(n,)) for n in range(8)]
    started = time.monotonic()
    for thread in uploads:
        thread.start()
    for thread in uploads:
        thread.join(30)
    took = time.monotonic() - started
    assert not errors, errors
    assert took < 3.0, f"eight uploads took {took:.2f} s"
    sleeping.join(60)
    names = sorted(e.name for e in sbx.files.list("parallel"))
    assert names == sorted(f"{n}.txt" for n in range(8)), names
    assert sbx.files.read("parallel/7.txt") == "file 7" * 1000


@check
def the_code_works_in_home_user_and_sees_the_sdks_files():
    sbx = sandbox()
    assert sbx.run_code("import os; os.getcwd()").text == "/home/user"
    sbx.files.write("/home/user/a.txt", "from the sdk")
    sbx.files.write("nested/b.txt", "relative")
    assert sbx.run_code("open('/home/user/a.txt').read()").text == "from the sdk"
    assert sbx.run_code("open('a.txt').read()").text == "from the sdk"
    assert sbx.run_code("open('nested/b.txt').read()").text == "relative"
    assert sbx.run_code("open('/mnt/data/a.txt').read()").text == "from the sdk", "/mnt/data still names the home"
    sbx.run_code("open('made_by_code.txt', 'w').write('by code')")
    assert sbx.files.read("/home/user/made_by_code.txt") == "by code"


@check
def root_and_absolute_paths_are_the_sandboxs():
    sbx = sandbox()
    # Root's home in the sandbox, spelled as a folder and a name.
    in_roots_home = ROOT_HOME + "/r.txt"
    info = sbx.files.write("r.txt", "root's", user="root")
    assert info.path == in_roots_home, info.path
    assert sbx.files.read(in_roots_home) == "root's"
    assert sbx.files.read("~/r.txt", user="root") == "root's"
    assert sbx.files.get_info(in_roots_home).owner == "root"
    assert sbx.run_code(f"open({in_roots_home!r}).read()").text == "root's"
    for path in ["/tmp/x.txt", "/opt/app/config.json", "/srv/other/y.txt"]:
        assert sbx.files.write(path, path).path == path
        assert sbx.files.read(path) == path
        assert sbx.run_code(f"open({path!r}).read()").text == path, path
    sbx.run_code("open('/tmp/by_code.txt', 'w').write('tmp by code')")
    assert sbx.files.read("/tmp/by_code.txt") == "tmp by code"
    names = {e.name for e in sbx.files.list("/")}
    assert {"home", "root", "tmp", "opt"} <= names, names


@check
def dot_dot_never_leaves_the_sandbox():
    # Boundary: `..` stops at the sandbox's own root, as `/..` is `/` on
    # Linux; the host's files are neither read nor written.
    sbx = sandbox()
    host_passwd = open("/etc/passwd").read()
    try:
        sbx.files.read("/home/user/../../etc/passwd")
    except NotFoundException:
        pass
    else:
        raise AssertionError("the sandbox has no /etc/passwd of its own, yet one was read")
    marker = "written through dot-dot"
    info = sbx.files.write("../../../../../../etc/passwd", marker)
    assert info.path == "/etc/passwd", info.path
    assert sbx.files.read("/etc/passwd") == marker
    assert sbx.run_code("open('/etc/passwd').read()").text == marker
    assert open("/etc/passwd").read() == host_passwd, "the host's file is untouched"
    above = sbx.run_code("import os\ntry:\n    up = sorted(os.listdir('/../..'))\nexcept OSError:\n    up = 'refused'\nup in ('refused', sorted(os.listdir('/')))")
    assert above.text == "True", above


def main():
    run_checks(sys.argv[3:])

main()
