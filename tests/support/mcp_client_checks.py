"""Drives anypath's MCP server with the official MCP Python SDK (`mcp` on PyPI).

Usage:
    mcp_client_checks.py SCENARIO http URL KEY [OTHER_KEY]
    mcp_client_checks.py SCENARIO stdio COMMAND [ARG ...]

Each scenario asserts what a real client sees and exits non-zero, with the
reason, on the first difference. tests/mcp_clients.rs runs every scenario on
both transports.
"""

import asyncio
import base64
import json
import hashlib
import struct
import sys
import zlib

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

TOOLS = {"upload_file", "run_python", "read_artifact", "close_session", "list_files", "fork_session", "fork_session_many", "load_artifact", "attach_dataset",
         "snapshot_session", "list_snapshots", "start_from_snapshot", "delete_snapshot", "start_run", "get_run", "run_command", "start_command", "get_command"}


def connect(transport, key=None):
    """An MCP client for the transport described on the command line."""
    if transport[0] == "http":
        headers = {"x-api-key": key} if key else {}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        return mcp.Client(streamable_http_client(transport[1], http_client=http))
    return mcp.Client(mcp.StdioServerParameters(command=transport[1], args=transport[2:]))


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


def ok(result, tool):
    assert not result.is_error, f"{tool} failed: {text_of(result)}"
    assert isinstance(result.structured_content, dict), f"{tool}: no structured content: {result}"
    return result.structured_content


def tool_error(result, tool, code):
    """The error's message: a tool error is a result marked isError whose one
    text block is the JSON of exactly its stable code and message; it has no
    structured content (that is the answer's, checked against its schema)."""
    assert result.is_error, f"{tool} should have failed with {code}: {result.structured_content}"
    assert result.structured_content is None, f"{tool}: an error with structured content {result.structured_content!r}"
    assert [getattr(b, "type", None) for b in result.content] == ["text"], f"{tool}: error content {result.content!r}"
    error = json.loads(text_of(result))
    assert isinstance(error, dict) and set(error) == {"code", "message"}, f"{tool}: error text {error!r}"
    assert error["code"] == code, f"{tool}: expected {code}, got {error!r}"
    assert isinstance(error["message"], str) and error["message"], f"{tool}: empty message {error!r}"
    return error["message"]


def tiny_png():
    """A 2x2 red PNG, made with the standard library."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


async def tools(transport, key, _other):
    """Every tool is listed with an object input schema, its required fields,
    an output schema and a description a model can act on."""
    required = {
        "upload_file": {"session_id", "filename", "content_base64"},
        "run_python": {"session_id", "code"},
        "read_artifact": {"session_id", "path"},
        "close_session": {"session_id"},
        "list_files": {"session_id"},
        "fork_session": {"session_id", "new_session_id"},
        "fork_session_many": {"session_id", "count"},
        "load_artifact": {"session_id", "artifact_id"},
        "attach_dataset": {"session_id", "name"},
        "snapshot_session": {"session_id"},
        "list_snapshots": set(),
        "start_from_snapshot": {"snapshot", "new_session_id"},
        "delete_snapshot": {"snapshot"},
        "start_run": {"session_id", "code"},
        "get_run": {"session_id", "run_id"},
        "run_command": {"session_id", "command"},
        "start_command": {"session_id", "command"},
        "get_command": {"session_id", "command_id"},
    }
    outputs = {
        "upload_file": {"path"},
        "run_python": {"run_id", "exit_code", "stdout", "stderr", "results", "artifacts", "state_reset", "state", "metrics"},
        "read_artifact": {"path", "mime_type", "content_base64"},
        "close_session": {"status"},
        "list_files": {"files", "datasets"},
        "fork_session": {"session_id", "hibernated"},
        "fork_session_many": {"sessions"},
        "load_artifact": {"path", "size_bytes"},
        "attach_dataset": {"name", "path", "files"},
        "snapshot_session": {"snapshot_id", "names", "session_id", "expires_unix"},
        "list_snapshots": {"snapshots"},
        "start_from_snapshot": {"session_id", "hibernated"},
        "delete_snapshot": {"deleted"},
        "start_run": {"run_id", "session_id", "state", "started_at", "events"},
        "get_run": {"run_id", "session_id", "state", "started_at", "events"},
        "run_command": {"session_id", "exit_code", "stdout", "stderr", "duration_us"},
        "start_command": {"command_id", "session_id", "state", "command", "started_at", "events"},
        "get_command": {"command_id", "session_id", "state", "command", "started_at", "events"},
    }
    async with connect(transport, key) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS, f"tools listed: {sorted(listed)}"
        for name, tool in listed.items():
            schema = tool.input_schema
            assert schema.get("type") == "object", f"{name}: input schema {schema}"
            assert set(schema.get("required", [])) == required[name], f"{name}: required {schema.get('required')}"
            assert schema.get("additionalProperties") is False, f"{name}: unknown arguments must be refused"
            out = tool.output_schema
            assert out and out.get("type") == "object", f"{name}: output schema {out}"
            assert outputs[name] <= set(out.get("properties", {})), f"{name}: output properties {sorted(out.get('properties', {}))}"
            assert tool.description and len(tool.description) > 60, f"{name}: description {tool.description!r}"
        assert "limits" in listed["run_python"].input_schema["properties"]
        # tests/mcp_clients.rs starts every server with limits unlike the
        # defaults; the descriptions state those, not the defaults.
        upload = listed["upload_file"].description
        assert "7 MiB per file" in upload and "100 MiB" not in upload, upload
        read = listed["read_artifact"].description
        assert "read cap (1 KiB)" in read and "5 MiB" not in read, read
        run = listed["run_python"].description
        assert "python: 7 s wall clock" in run and "python: 5 s" not in run, run
        assert "/data" in listed["list_files"].description and "/data" in run, "a model is told where datasets are"
        assert listed["read_artifact"].annotations.read_only_hint is True
        assert listed["close_session"].annotations.destructive_hint is True


async def flow(transport, key, _other):
    """upload -> run -> artifacts -> read_artifact -> download_url -> close."""
    session = "flow-" + transport[0]
    csv = b"city,sales\nOslo,3\nLima,5\nOslo,4\n"
    async with connect(transport, key) as client:
        uploaded = ok(await client.call_tool("upload_file", {
            "session_id": session, "filename": "sales.csv",
            "content_base64": base64.b64encode(csv).decode()}), "upload_file")
        assert uploaded["path"] == "/mnt/data/sales.csv", uploaded

        png = tiny_png()
        code = (
            "import csv, base64\n"
            "totals = {}\n"
            "for row in csv.DictReader(open('/mnt/data/sales.csv')):\n"
            "    totals[row['city']] = totals.get(row['city'], 0) + int(row['sales'])\n"
            f"open('/mnt/data/chart.png', 'wb').write(base64.b64decode({base64.b64encode(png).decode()!r}))\n"
            "open('/mnt/data/report.txt', 'w').write(repr(sorted(totals.items())))\n"
            "print(totals['Oslo'])\n"
        )
        report = ok(await client.call_tool("run_python", {"session_id": session, "code": code}), "run_python")
        assert report["exit_code"] == 0 and report["error"] is None, report
        assert report["stdout"].strip() == "7", report["stdout"]
        by_name = {a["filename"]: a for a in report["artifacts"]}
        assert set(by_name) == {"chart.png", "report.txt"}, sorted(by_name)
        chart = by_name["chart.png"]
        assert chart["mime_type"] == "image/png" and chart["size_bytes"] == len(png), chart
        assert chart["sha256"] == hashlib.sha256(png).hexdigest(), chart

        read = await client.call_tool("read_artifact", {"session_id": session, "path": "/mnt/data/chart.png"})
        content = ok(read, "read_artifact")
        assert content["mime_type"] == "image/png", content
        assert base64.b64decode(content["content_base64"]) == png
        images = [b for b in read.content if getattr(b, "type", None) == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png", read.content
        assert base64.b64decode(images[0].data) == png

        text = ok(await client.call_tool("read_artifact", {"session_id": session, "path": "report.txt"}), "read_artifact")
        assert base64.b64decode(text["content_base64"]) == b"[('Lima', 5), ('Oslo', 7)]", text
        assert text["mime_type"].startswith("text/plain"), text

        # The link works with no header at all, as an n8n HTTP Request node would use it.
        async with httpx2.AsyncClient(timeout=30) as plain:
            downloaded = await plain.get(chart["download_url"])
        assert downloaded.status_code == 200, downloaded.status_code
        assert downloaded.content == png

        files = ok(await client.call_tool("list_files", {"session_id": session}), "list_files")
        assert sorted(f["filename"] for f in files["files"]) == ["chart.png", "report.txt", "sales.csv"], files

        closed = ok(await client.call_tool("close_session", {"session_id": session}), "close_session")
        assert closed == {"status": "closed"}, closed
        tool_error(await client.call_tool("list_files", {"session_id": session}), "list_files", "no_such_session")

        # The artifact outlives its session: back into a new one by id.
        revised = session + "-revised"
        loaded = ok(await client.call_tool("load_artifact", {
            "session_id": revised, "artifact_id": by_name["report.txt"]["id"], "filename": "draft.txt"}), "load_artifact")
        assert loaded["path"] == "/mnt/data/draft.txt", loaded
        again = ok(await client.call_tool("run_python", {"session_id": revised, "code": "print(open('draft.txt').read())"}), "run_python")
        assert again["stdout"].strip() == "[('Lima', 5), ('Oslo', 7)]", again
        tool_error(await client.call_tool("load_artifact", {"session_id": revised, "artifact_id": "0" * 32}),
                   "load_artifact", "no_such_artifact")
        ok(await client.call_tool("close_session", {"session_id": revised}), "close_session")


async def data_runtime(transport, key, _other):
    """A session created on python-data by upload_file: pandas and matplotlib
    run, the chart comes back as an image; the session keeps its runtime."""
    session = "data-" + transport[0]
    csv = b"city,sales\nOslo,3\nLima,5\nOslo,4\n"
    async with connect(transport, key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("upload_file", "run_python"):
            runtime = tools[name].input_schema["properties"]["runtime"]
            assert "python-data" in json.dumps(runtime), (name, runtime)
        ok(await client.call_tool("upload_file", {
            "session_id": session, "filename": "sales.csv", "runtime": "python-data",
            "content_base64": base64.b64encode(csv).decode()}), "upload_file")
        code = (
            "import pandas as pd, matplotlib.pyplot as plt\n"
            "df = pd.read_csv('sales.csv')\n"
            "totals = df.groupby('city').sales.sum()\n"
            "totals.plot.bar(figsize=(0.4, 0.4)).figure.savefig('totals.png', dpi=20)  # under the 1 KiB read cap\n"
            "print(totals.to_dict())\n"
        )
        report = ok(await client.call_tool("run_python", {"session_id": session, "code": code}), "run_python")
        assert report["exit_code"] == 0, report
        assert report["stdout"].strip() == "{'Lima': 5, 'Oslo': 7}", report["stdout"]
        assert [a["filename"] for a in report["artifacts"]] == ["totals.png"], report["artifacts"]
        read = await client.call_tool("read_artifact", {"session_id": session, "path": "totals.png"})
        images = [b for b in read.content if getattr(b, "type", None) == "image"]
        assert len(images) == 1 and base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n", read.content
        again = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(len(df))"}), "run_python")
        assert again["stdout"].strip() == "3", again
        tool_error(await client.call_tool("run_python", {"session_id": session, "code": "1", "runtime": "python"}),
                   "run_python", "runtime_mismatch")
        fresh = ok(await client.call_tool("run_python", {"session_id": session + "-2", "runtime": "python-data",
                   "code": "import numpy\nprint(numpy.arange(5).sum())"}), "run_python")
        assert fresh["stdout"].strip() == "10", fresh
        # A session that names no runtime gets the default, python-data.
        default = ok(await client.call_tool("run_python", {"session_id": session + "-3",
                     "code": "import numpy\nprint(numpy.ones(3).sum())"}), "run_python")
        assert default["stdout"].strip() == "3.0" and default["runtime"] == "python-data", default
        plain = ok(await client.call_tool("run_python", {"session_id": session + "-4", "runtime": "python",
                   "code": "import numpy"}), "run_python")
        assert plain["error"]["kind"] == "exception" and "numpy" in plain["traceback"], plain
        for name in (session, session + "-2", session + "-3", session + "-4"):
            ok(await client.call_tool("close_session", {"session_id": name}), "close_session")


async def notebook(transport, key, _other):
    """run_python answers like a notebook: a table's text and HTML, a chart as
    image content the model sees at once, and output as it happens through
    progress notifications."""
    session = "notebook-" + transport[0]
    async with connect(transport, key) as client:
        out = await client.list_tools()
        schema = {t.name: t for t in out.tools}["run_python"].output_schema
        assert "results" in schema.get("properties", {}), sorted(schema.get("properties", {}))
        table = await client.call_tool("run_python", {
            "session_id": session, "runtime": "python-data",
            "code": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf.describe()"})
        report = ok(table, "run_python")
        [result] = report["results"]
        assert result["type"] == "text" and "mean" in result["text"], result
        assert "<table" in result["mime"]["text/html"], result["mime"].keys()
        assert any(getattr(b, "type", None) == "text" and "mean" in b.text and "{" not in b.text[:1] for b in table.content), table.content
        chart = await client.call_tool("run_python", {
            "session_id": session, "code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"})
        report = ok(chart, "run_python")
        assert [r["type"] for r in report["results"]] == ["image"], report["results"]
        images = [b for b in chart.content if getattr(b, "type", None) == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png", chart.content
        assert base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
        # The report's text leaves the picture out: it is the image content.
        assert images[0].data not in text_of(chart), "the PNG is sent twice"

        heard = []

        async def progress(value, total, message):
            heard.append((asyncio.get_running_loop().time(), value, message))

        code = "import time\nprint('first')\ntime.sleep(1)\nprint('second')\n'done'"
        ran = await client.call_tool("run_python", {"session_id": session, "code": code}, progress_callback=progress)
        ended = asyncio.get_running_loop().time()
        report = ok(ran, "run_python")
        assert report["stdout"] == "first\nsecond\n", report
        first = [at for at, _, message in heard if message and "first" in message]
        assert first, f"no progress notification carried the first line: {heard}"
        assert ended - first[0] >= 0.7, f"the first line came only with the end: {heard}"
        assert any(message and "second" in message for _, _, message in heard), heard
        values = [value for _, value, _ in heard]
        assert values == sorted(values) and len(set(values)) == len(values), f"progress must increase: {values}"
        ok(await client.call_tool("close_session", {"session_id": session}), "close_session")


async def state(transport, key, _other):
    """Variables, imports and functions live across run_python calls."""
    session = "state-" + transport[0]
    async with connect(transport, key) as client:
        first = ok(await client.call_tool("run_python", {"session_id": session,
            "code": "import math\nx = 41\ndef double(v):\n    return 2 * v\n"}), "run_python")
        assert first["exit_code"] == 0, first
        second = ok(await client.call_tool("run_python", {"session_id": session,
            "code": "print(x + 1, double(x), math.floor(2.5))"}), "run_python")
        assert second["stdout"].strip() == "42 82 2", second
        assert second["state_reset"] is False, second
        failing = ok(await client.call_tool("run_python", {"session_id": session, "code": "1/0"}), "run_python")
        assert failing["exit_code"] != 0 and failing["error"]["kind"] == "exception", failing
        assert "ZeroDivisionError" in failing["traceback"], failing
        after = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(x)"}), "run_python")
        assert after["stdout"].strip() == "41", after
        assert after["state"] == "kept", after

        # A fork carries the live state; the two sessions then part.
        fork = session + "-fork"
        forked = ok(await client.call_tool("fork_session", {"session_id": session, "new_session_id": fork}), "fork_session")
        assert forked["session_id"] == fork and forked["hibernated"] is True, forked
        child = ok(await client.call_tool("run_python", {"session_id": fork, "code": "x = double(x)\nprint(x)"}), "run_python")
        assert (child["stdout"].strip(), child["state"]) == ("82", "resumed"), child
        parent = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(x)"}), "run_python")
        assert parent["stdout"].strip() == "41", parent
        tool_error(await client.call_tool("fork_session", {"session_id": session, "new_session_id": fork}), "fork_session", "session_exists")
        # Many children in one call, each with the parent's state and its own.
        many = ok(await client.call_tool("fork_session_many", {"session_id": session, "count": 3, "prefix": session + "-try"}), "fork_session_many")
        assert [s["session_id"] for s in many["sessions"]] == [f"{session}-try-{i}" for i in (1, 2, 3)], many
        for i, branch in enumerate(many["sessions"]):
            ran = ok(await client.call_tool("run_python", {"session_id": branch["session_id"], "code": f"x = x + {i}\nprint(x)"}), "run_python")
            assert (ran["stdout"].strip(), ran["state"]) == (str(41 + i), "resumed"), ran
            ok(await client.call_tool("close_session", {"session_id": branch["session_id"]}), "close_session")
        kept = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(x)"}), "run_python")
        assert kept["stdout"].strip() == "41", kept
        tool_error(await client.call_tool("fork_session_many", {"session_id": session, "count": 0}), "fork_session_many", "invalid_request")
        ok(await client.call_tool("close_session", {"session_id": fork}), "close_session")

        # A snapshot keeps the state; sessions start from it by name.
        name = session + "-snap"
        snap = ok(await client.call_tool("snapshot_session", {"session_id": session, "name": name}), "snapshot_session")
        assert snap["names"] == [name] and snap["session_id"] == session, snap
        ok(await client.call_tool("run_python", {"session_id": session, "code": "x = 0"}), "run_python")
        started = session + "-started"
        ok(await client.call_tool("start_from_snapshot", {"snapshot": name, "new_session_id": started}), "start_from_snapshot")
        again = ok(await client.call_tool("run_python", {"session_id": started, "code": "print(double(x))"}), "run_python")
        assert again["stdout"].strip() == "82", again
        listed = ok(await client.call_tool("list_snapshots", {"session_id": session}), "list_snapshots")
        assert [s["snapshot_id"] for s in listed["snapshots"]] == [snap["snapshot_id"]], listed
        assert ok(await client.call_tool("delete_snapshot", {"snapshot": name}), "delete_snapshot")["deleted"] is True
        tool_error(await client.call_tool("start_from_snapshot", {"snapshot": name, "new_session_id": session + "-late"}),
                   "start_from_snapshot", "no_such_snapshot")
        ok(await client.call_tool("close_session", {"session_id": started}), "close_session")

        # A run in the background: its id at once, its report by polling.
        run_id = session + "-bg"
        begun = ok(await client.call_tool("start_run", {"session_id": session, "run_id": run_id,
            "code": "import time\ntime.sleep(1)\nprint(double(21))"}), "start_run")
        assert (begun["run_id"], begun["state"]) == (run_id, "running"), begun
        for _ in range(100):
            polled = ok(await client.call_tool("get_run", {"session_id": session, "run_id": run_id}), "get_run")
            if polled["state"] != "running":
                break
            await asyncio.sleep(0.1)
        assert polled["state"] == "done" and polled["report"]["stdout"].strip() == "42", polled
        tool_error(await client.call_tool("get_run", {"session_id": session, "run_id": "no-such-run"}), "get_run", "no_such_run")
        tool_error(await client.call_tool("start_run", {"session_id": session, "code": "1", "callback_url": "http://169.254.169.254/"}),
                   "start_run", "callback_not_allowed")
        ok(await client.call_tool("close_session", {"session_id": session}), "close_session")


async def errors(transport, key, _other):
    """Bad input is a tool error the model can read, never a protocol failure."""
    session = "errors-" + transport[0]
    async with connect(transport, key) as client:
        for name in ["../etc/passwd", "/etc/passwd", "sub/../../x", "..", ""]:
            tool_error(await client.call_tool("upload_file", {"session_id": session, "filename": name,
                "content_base64": "aGk="}), "upload_file", "invalid_name")
        # A refused upload creates nothing, not even the session.
        tool_error(await client.call_tool("read_artifact", {"session_id": session,
            "path": "../../etc/passwd"}), "read_artifact", "no_such_session")
        tool_error(await client.call_tool("list_files", {"session_id": "never-made"}), "list_files", "no_such_session")
        tool_error(await client.call_tool("close_session", {"session_id": "never-made"}), "close_session", "no_such_session")
        tool_error(await client.call_tool("run_python", {"session_id": "a/b", "code": "1"}), "run_python", "invalid_name")
        tool_error(await client.call_tool("run_python", {"session_id": session}), "run_python", "invalid_arguments")
        tool_error(await client.call_tool("run_python", {"session_id": session, "code": "1", "limits": {"fuel": "lots"}}),
                   "run_python", "invalid_arguments")
        tool_error(await client.call_tool("upload_file", {"session_id": session, "filename": "a.txt",
            "content_base64": "not base64!"}), "upload_file", "invalid_base64")

        ok(await client.call_tool("upload_file", {"session_id": session, "filename": "a.txt",
            "content_base64": "aGk="}), "upload_file")
        tool_error(await client.call_tool("upload_file", {"session_id": session, "filename": "a.txt",
            "content_base64": "aGk="}), "upload_file", "file_exists")
        tool_error(await client.call_tool("read_artifact", {"session_id": session,
            "path": "../../etc/passwd"}), "read_artifact", "invalid_name")

        # Over the read cap (the server runs with 1 KiB): the error names a link that works.
        ok(await client.call_tool("run_python", {"session_id": session,
            "code": "open('/mnt/data/big.bin', 'wb').write(bytes(range(256)) * 16)"}), "run_python")
        text = tool_error(await client.call_tool("read_artifact", {"session_id": session, "path": "big.bin"}),
                          "read_artifact", "over_read_cap")
        url = next(word for word in text.split() if word.startswith("http"))
        async with httpx2.AsyncClient(timeout=30) as plain:
            downloaded = await plain.get(url)
        assert downloaded.status_code == 200 and downloaded.content == bytes(range(256)) * 16, downloaded.status_code

        # A tool the server does not have: the client reports it, the connection lives on.
        try:
            unknown = await client.call_tool("rm_rf", {})
            assert unknown.is_error, unknown
        except mcp.MCPError:
            pass
        ok(await client.call_tool("list_files", {"session_id": session}), "list_files")
        ok(await client.call_tool("close_session", {"session_id": session}), "close_session")


async def tenants(transport, key, other):
    """Two tenants using the same session_id never meet."""
    session = "shared"
    async with connect(transport, key) as alice, connect(transport, other) as bob:
        ok(await alice.call_tool("upload_file", {"session_id": session, "filename": "secret.txt",
            "content_base64": base64.b64encode(b"alice only").decode()}), "upload_file")
        ok(await alice.call_tool("run_python", {"session_id": session, "code": "token = 'alice-state'"}), "run_python")

        tool_error(await bob.call_tool("list_files", {"session_id": session}), "list_files", "no_such_session")
        tool_error(await bob.call_tool("read_artifact", {"session_id": session, "path": "secret.txt"}),
                   "read_artifact", "no_such_session")
        seen = ok(await bob.call_tool("run_python", {"session_id": session,
            "code": "import os\nprint(sorted(os.listdir('/mnt/data')), 'token' in globals())"}), "run_python")
        assert seen["stdout"].strip() == "[] False", seen
        tool_error(await bob.call_tool("read_artifact", {"session_id": session, "path": "secret.txt"}),
                   "read_artifact", "no_such_file")
        ok(await bob.call_tool("close_session", {"session_id": session}), "close_session")

        still = ok(await alice.call_tool("run_python", {"session_id": session,
            "code": "print(open('/mnt/data/secret.txt').read(), token)"}), "run_python")
        assert still["stdout"].strip() == "alice only alice-state", still
        ok(await alice.call_tool("close_session", {"session_id": session}), "close_session")


async def unauthorized(transport, _key, _other):
    """Without a key the transport answers 401 before any JSON-RPC, and the
    real client cannot connect; a foreign Host header is refused too."""
    url = transport[1]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"accept": "application/json, text/event-stream"}
    # A refusal answers before the body is read, so the server closes that
    # connection: the probes ask for one-shot connections, and the allowed
    # call after them does not race the close on a reused one.
    probe = {**headers, "connection": "close"}
    async with httpx2.AsyncClient(timeout=30) as plain:
        refused = await plain.post(url, json=initialize, headers=probe)
        assert refused.status_code == 401, refused.status_code
        assert refused.json()["error"]["code"] == "unauthorized", refused.text
        wrong = await plain.post(url, json=initialize, headers={**probe, "x-api-key": "key-mallory"})
        assert wrong.status_code == 401, wrong.status_code
        rebound = await plain.post(url, json=initialize, headers={**probe, "x-api-key": _key, "host": "evil.example"})
        assert rebound.status_code in (400, 403), f"a foreign Host got {rebound.status_code}"
        allowed = await plain.post(url, json=initialize, headers={**headers, "x-api-key": _key})
        assert allowed.status_code == 200, (allowed.status_code, allowed.text)
    try:
        async with connect(transport, None) as client:
            await client.list_tools()
    except Exception:  # the SDK's error type for a refused transport varies by version
        return
    raise AssertionError("the client listed tools without a key")


async def datasets(transport, key, _other):
    """A mounted dataset (tests/mcp_clients.rs mounts `census`) is named by
    list_files and read at /data, never written; over HTTP a dataset staged
    with PUT /v1/datasets is attached with attach_dataset."""
    session = "datasets-" + transport[0]
    async with connect(transport, key) as client:
        report = ok(await client.call_tool("run_python", {"session_id": session, "code": (
            "import csv, errno\n"
            "rows = list(csv.DictReader(open('/data/census/people.csv')))\n"
            "try:\n    open('/data/census/people.csv', 'a').write('x')\n"
            "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
            "print(len(rows))\n")}), "run_python")
        assert report["stdout"] == "EROFS\n3\n", report
        files = ok(await client.call_tool("list_files", {"session_id": session}), "list_files")
        assert [d["path"] for d in files["datasets"]] == ["/data/census"], files
        tool_error(await client.call_tool("attach_dataset", {"session_id": session, "name": "nope"}), "attach_dataset", "no_such_dataset")
        if transport[0] != "http":
            return
        base = transport[1].rsplit("/mcp", 1)[0]
        async with httpx2.AsyncClient(timeout=30, headers={"x-api-key": key}) as http:
            staged = await http.put(f"{base}/v1/datasets/prices.csv", content=b"item,price\ntea,3\n")
        assert staged.status_code == 201, staged.text
        attached = ok(await client.call_tool("attach_dataset", {"session_id": session, "name": "prices.csv"}), "attach_dataset")
        assert attached["path"] == "/data/prices.csv" and attached["sha256"] == staged.json()["sha256"], attached
        again = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(open('/data/prices.csv').read().split()[1])"}), "run_python")
        assert again["stdout"] == "tea,3\n", again


async def commands(transport, key, _other):
    """run_command beside run_python: the same files, the Python state untouched."""
    session = "mcp-commands"
    async with connect(transport, key) as client:
        ok(await client.call_tool("run_python", {"session_id": session, "code": "kept = 5\nopen('data.txt', 'w').write('b\\na\\nc\\n')"}), "run_python")
        ran = ok(await client.call_tool("run_command", {"session_id": session, "command": "sort data.txt | head -2; echo $GREETING", "env": {"GREETING": "hi"}}), "run_command")
        assert (ran["exit_code"], ran["stdout"]) == (0, "a\nb\nhi\n"), ran
        ran = ok(await client.call_tool("run_command", {"session_id": session, "command": "wc -l > count.txt < data.txt; python -c 'print(open(\"count.txt\").read().strip())'"}), "run_command")
        assert ran["stdout"] == "3\n", ran
        failed = ok(await client.call_tool("run_command", {"session_id": session, "command": "no-such-program"}), "run_command")
        assert failed["exit_code"] == 127 and "not found" in failed["stderr"], failed
        again = ok(await client.call_tool("run_python", {"session_id": session, "code": "print(kept, open('count.txt').read().strip())"}), "run_python")
        assert again["stdout"] == "5 3\n", again
        tool_error(await client.call_tool("run_command", {"session_id": session, "command": " "}), "run_command", "invalid_request")
        started = ok(await client.call_tool("start_command", {"session_id": session, "command": "sleep 0.3; sort -r data.txt"}), "start_command")
        assert started["state"] == "running", started
        for _ in range(200):
            polled = ok(await client.call_tool("get_command", {"session_id": session, "command_id": started["command_id"]}), "get_command")
            if polled["state"] != "running":
                break
            await asyncio.sleep(0.05)
        assert (polled["state"], polled["report"]["stdout"]) == ("done", "c\nb\na\n"), polled
        tool_error(await client.call_tool("get_command", {"session_id": session, "command_id": "1"}), "get_command", "no_such_command")


async def javascript(transport, key, _other):
    """A session made with runtime `javascript`: its declarations persist
    across run_python calls, console.log is stdout, the last value a result,
    an error the cell's; the session keeps its runtime."""
    session = "js-" + transport[0]
    async with connect(transport, key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "javascript" in json.dumps(tools["run_python"].input_schema["properties"]["runtime"]), tools["run_python"].input_schema
        first = ok(await client.call_tool("run_python", {"session_id": session, "runtime": "javascript",
                   "code": "let hits = 41; console.log('counted'); hits"}), "run_python")
        assert first["stdout"] == "counted\n" and first["results"][0]["text"] == "41", first
        again = ok(await client.call_tool("run_python", {"session_id": session, "code": "hits += 1; ({ hits })"}), "run_python")
        assert again["results"][0]["text"] == "{ hits: 42 }", again
        assert json.loads(again["results"][0]["mime"]["application/json"]) == {"hits": 42}, again["results"][0]["mime"]
        failed = ok(await client.call_tool("run_python", {"session_id": session, "code": "hits.toFixed(-1)"}), "run_python")
        assert failed["error"]["kind"] == "exception" and failed["error"]["type_name"] == "RangeError", failed
        tool_error(await client.call_tool("run_python", {"session_id": session, "code": "1", "runtime": "python"}),
                   "run_python", "runtime_mismatch")
        ok(await client.call_tool("close_session", {"session_id": session}), "close_session")


SCENARIOS = {f.__name__: f for f in [tools, flow, commands, data_runtime, javascript, notebook, state, errors, tenants, unauthorized, datasets]}


def main():
    scenario, transport = SCENARIOS[sys.argv[1]], sys.argv[2:]
    key = other = None
    if transport[0] == "http":
        key = transport[2] if len(transport) > 2 else None
        other = transport[3] if len(transport) > 3 else None
        transport = transport[:2]
    asyncio.run(scenario(transport, key, other))
    print(f"{sys.argv[1]} over {transport[0]}: ok")


if __name__ == "__main__":
    main()
