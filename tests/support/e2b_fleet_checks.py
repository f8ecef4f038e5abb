"""E2B's Python SDK (`e2b-code-interpreter`, pinned by `cargo xtask test`)
over a fleet of anypath hosts sharing sessions: each SDK call names the
host it goes to with the SDK's own `api_url` and `sandbox_url` options, as
a client behind a load balancer without stickiness would land.

Usage: e2b_fleet_checks.py KEY URL_A URL_B URL_C

Prints `checks passed` when every step did what E2B's users expect.
"""

import os
import sys

KEY, A, B, C = sys.argv[1:5]
os.environ["E2B_API_KEY"] = KEY

from e2b import SandboxQuery, SandboxState  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402


def through(url):
    """The SDK's options that send every call of a sandbox to `url`."""
    return {"api_url": url, "sandbox_url": url}


created = Sandbox.create(timeout=120, metadata={"suite": "fleet"}, **through(A))
sandbox_id = created.sandbox_id
try:
    created.run_code("x = 41")

    # A snapshot taken through A starts sandboxes on B and C, is listed on
    # every host, and once deleted through B starts nothing anywhere.
    created.files.write("snapshotted.txt", "in the snapshot")
    snapshot = created.create_snapshot()
    for url in (B, C):
        started = Sandbox.create(snapshot.snapshot_id, **through(url))
        answer = started.run_code("x + 1")
        assert answer.error is None and answer.text == "42", f"the snapshot's state on {url}: {answer}"
        assert started.files.read("snapshotted.txt") == "in the snapshot", f"the snapshot's files on {url}"
        started.kill()
    listed = [s.snapshot_id for s in Sandbox.list_snapshots(sandbox_id=sandbox_id, **through(C)).next_items()]
    assert listed == [snapshot.snapshot_id], f"C lists the snapshot taken on A: {listed}"
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **through(B)) is True, "B deletes A's snapshot"
    for url in (A, C):
        try:
            Sandbox.create(snapshot.snapshot_id, **through(url))
        except Exception:
            pass
        else:
            raise AssertionError(f"{url} started a sandbox from a snapshot deleted through B")

    on_b = Sandbox.connect(sandbox_id, **through(B))
    answer = on_b.run_code("x + 1")
    assert answer.error is None and answer.text == "42", f"A's state answers on B: {answer}"
    on_b.files.write("notes.txt", "written through B")
    assert on_b.files.read("notes.txt") == "written through B"

    # Paused through A: every host then reports it paused, and none runs code in it.
    assert Sandbox.pause(sandbox_id, **through(A)), "A pauses the sandbox B used"
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED]), **through(C)).next_items()
    assert sandbox_id in [s.sandbox_id for s in paused], f"C lists the sandbox A paused: {paused}"

    # Connected through C: resumed there, its state and files with it.
    on_c = Sandbox.connect(sandbox_id, **through(C))
    assert on_c.is_running(), "connect resumes the paused sandbox"
    assert on_c.files.read("notes.txt") == "written through B", "B's file reads through C"
    answer = on_c.run_code("x")
    assert answer.error is None and answer.text == "41", f"the state paused on A resumes on C: {answer}"
    running = Sandbox.list(query=SandboxQuery(state=[SandboxState.RUNNING]), **through(B)).next_items()
    assert sandbox_id in [s.sandbox_id for s in running], f"B lists it running again: {running}"

    # Killed through B: gone on every host.
    assert Sandbox.kill(sandbox_id, **through(B))
    for url in (A, B, C):
        listed = Sandbox.list(query=SandboxQuery(state=[SandboxState.RUNNING, SandboxState.PAUSED]), **through(url)).next_items()
        assert sandbox_id not in [s.sandbox_id for s in listed], f"{url} no longer lists the killed sandbox"
finally:
    try:
        Sandbox.kill(sandbox_id, **through(A))
    except Exception:
        pass
print("checks passed")
