"""`cargo xtask bench`'s E2B rows: a new sandbox and its first result, through
E2B's Python SDK (`Sandbox.create()` + `run_code`), beside the same through
anypath's own HTTP API (open a data-runtime session + its first run), from
one Python process over kept-alive connections; then snapshots through the
SDK: `create_snapshot()` of a sandbox holding a DataFrame, and a sandbox
made from that snapshot to its first result; then commands through the
SDK's `commands.run` (`echo hi`, `python -c`, `ls -la` of a folder of 1,000
files) beside the same programs started natively on this host.

Usage: e2b_bench.py E2B_URL SANDBOX_URL E2B_KEY SANDBOX_KEY RUNS
Prints one JSON object: each path's latencies in milliseconds.
"""

import json
import os
import sys
import time
import uuid

E2B_URL, SANDBOX_URL, E2B_KEY, SANDBOX_KEY, RUNS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
os.environ.update({"E2B_API_URL": E2B_URL, "E2B_SANDBOX_URL": E2B_URL, "E2B_API_KEY": E2B_KEY})

import httpx  # noqa: E402
from e2b_code_interpreter import Sandbox  # noqa: E402


def through_sdk():
    began = time.perf_counter()
    sandbox = Sandbox.create()
    text = sandbox.run_code("1 + 1").text
    took = time.perf_counter() - began
    assert text == "2", text
    sandbox.kill()
    return took


def through_http(client):
    session = f"bench-{uuid.uuid4().hex[:12]}"
    began = time.perf_counter()
    opened = client.post(f"{SANDBOX_URL}/v1/sessions", json={"session_id": session, "runtime": "python-data"})
    ran = client.post(f"{SANDBOX_URL}/v1/sessions/{session}/run", json={"code": "1 + 1"})
    took = time.perf_counter() - began
    assert opened.status_code in (200, 201) and ran.json()["results"][0]["text"] == "2", ran.text
    client.delete(f"{SANDBOX_URL}/v1/sessions/{session}")
    return took


def snapshots():
    """Each run snapshots a source sandbox holding a DataFrame and a file,
    then makes a sandbox from the snapshot and reads a value of its state."""
    source = Sandbox.create()
    source.run_code("import pandas as pd\nframe = pd.DataFrame({'x': range(1000)})")
    source.files.write("/home/user/data.csv", "x\n" + "\n".join(map(str, range(1000))))
    taken, started = [], []
    for _ in range(RUNS + 1):
        began = time.perf_counter()
        snapshot = source.create_snapshot()
        took = time.perf_counter() - began
        began = time.perf_counter()
        sandbox = Sandbox.create(snapshot.snapshot_id)
        text = sandbox.run_code("int(frame.x.sum())").text
        first = time.perf_counter() - began
        assert text == str(sum(range(1000))), text
        sandbox.kill()
        Sandbox.delete_snapshot(snapshot.snapshot_id)
        taken.append(took * 1e3)
        started.append(first * 1e3)
    source.kill()
    # The first of each is the warm-up.
    return taken[1:], started[1:]


def commands():
    """Each path's latencies through `commands.run` in one sandbox, and the
    native baselines: `bash -c 'echo hi'` and `python3 -I -c 'print(1)'`
    started as processes of this host."""
    import subprocess
    sandbox = Sandbox.create()
    sandbox.commands.run("mkdir many && cd many && for i in $(seq 1000); do touch f$i; done")
    paths = {"echo_ms": "echo hi", "python_ms": "python -c 'print(1)'", "ls_ms": "ls -la many"}
    found = {key: [] for key in paths}
    for key, command in paths.items():
        for run in range(RUNS + 1):
            began = time.perf_counter()
            result = sandbox.commands.run(command)
            took = time.perf_counter() - began
            assert result.exit_code == 0 and result.stdout, result
            if run:  # the first is the warm-up
                found[key].append(took * 1e3)
    assert sandbox.commands.run("ls many | wc -l").stdout.strip() == "1000"
    sandbox.kill()
    # `pip install` of a wheel with a dependency from the wheelhouse, and
    # its import in the next cell: each round in a sandbox of its own (made
    # before the clock starts), so nothing is installed or imported yet.
    found["pip_ms"] = []
    for run in range(RUNS + 1):
        fresh = Sandbox.create()
        began = time.perf_counter()
        installed = fresh.run_code("!pip install -q python-slugify")
        imported = fresh.run_code("import slugify\nslugify.slugify('a b')")
        took = time.perf_counter() - began
        assert installed.error is None and imported.text.strip("'") == "a-b", (installed, imported)
        fresh.kill()
        if run:
            found["pip_ms"].append(took * 1e3)
    for key, argv in {"native_echo_ms": ["bash", "-c", "echo hi"], "native_python_ms": ["python3", "-I", "-c", "print(1)"]}.items():
        found[key] = []
        for _ in range(RUNS):
            began = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            found[key].append((time.perf_counter() - began) * 1e3)
    return found


def main():
    with httpx.Client(headers={"x-api-key": SANDBOX_KEY}) as client:
        through_sdk(), through_http(client)  # warm both paths once
        sdk, http = [], []
        for _ in range(RUNS):
            sdk.append(through_sdk() * 1e3)
            http.append(through_http(client) * 1e3)
    snapshot, from_snapshot = snapshots()
    print(json.dumps({"sdk_ms": sdk, "http_ms": http, "snapshot_ms": snapshot, "from_snapshot_ms": from_snapshot, **commands()}))


main()
