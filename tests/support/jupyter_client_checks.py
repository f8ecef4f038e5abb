"""Jupyter's own Python clients (pinned in `.venv-jupyter` by `cargo xtask
test`) against anypath's kernels, unchanged, as their users run them.

Usage: jupyter_client_checks.py nbclient GATEWAY_URL TOKEN
       jupyter_client_checks.py autogen HOST PORT TOKEN OUTPUT_DIR
       jupyter_client_checks.py closing BASE_URL TOKEN

`nbclient` executes a notebook through jupyter_server's
`GatewayKernelManager` (what papermill and `jupyter nbconvert --execute`
do with `--gateway-url`); `autogen` runs code blocks with AutoGen's
`DockerJupyterCodeExecutor` pointed at anypath instead of a container;
`closing` closes kernel websockets with `websockets` (the library Open
WebUI's client uses) idle, during a cell and by deleting the kernel, and
checks the close handshake a Jupyter server gives.
Every check runs, failed or not; each prints `PASS name` or `FAIL name`
with its traceback; the last line is `N checks passed` when all did, and
the exit status is 1 when any failed.
"""

import asyncio
import base64
import json
import pathlib
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid

CHECKS = []


def check(run):
    CHECKS.append(run)
    return run


def run_checks():
    failed = 0
    for run in CHECKS:
        try:
            run()
            print(f"PASS {run.__name__}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {run.__name__}\n{traceback.format_exc()}", flush=True)
    if failed:
        sys.exit(1)
    print(f"{len(CHECKS)} checks passed")


def nbclient_checks(gateway_url, token):
    import nbformat
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayKernelManager
    from nbclient import NotebookClient

    gateway = GatewayClient.instance()
    gateway.url = gateway_url
    gateway.auth_token = token
    # The gateway kernel client opens its websocket without the auth header:
    # anypath takes the token in the websocket URL's path instead.
    gateway.ws_url = gateway_url.replace("http", "ws", 1) + "/token/" + token
    cells = [
        "print('hello')\nx = 41",
        "x + 1",
        "import pandas as pd\npd.DataFrame({'a': [1, 2, 3]})",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
        "import sys\nprint('warning', file=sys.stderr)",
        "1 / 0",
        "x * 2",
    ]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    # nbclient owns the kernel, as papermill and nbconvert do: it shuts it
    # down at the end, which closes its websocket (a kernel manager passed
    # in is left running, and its socket keeps this process alive until the
    # gateway client times out).
    client = NotebookClient(notebook, kernel_manager_class=GatewayKernelManager, kernel_name="python3", allow_errors=True, timeout=120)
    client.execute()
    outputs = [cell.outputs for cell in notebook.cells]

    @check
    def streams():
        assert outputs[0] == [nbformat.v4.new_output("stream", name="stdout", text="hello\n")], outputs[0]
        assert outputs[4][0].name == "stderr" and outputs[4][0].text == "warning\n", outputs[4]

    @check
    def execute_result_with_its_count():
        (result,) = outputs[1]
        assert result.output_type == "execute_result" and result.data["text/plain"] == "42", result
        assert result.execution_count == notebook.cells[1].execution_count == 2, result

    @check
    def dataframe_as_html():
        (result,) = outputs[2]
        assert "<table" in result.data["text/html"], result.data.keys()

    @check
    def figure_as_png():
        shown = [o for o in outputs[3] if o.output_type == "display_data"]
        assert shown and base64.b64decode(shown[0].data["image/png"])[1:4] == b"PNG", outputs[3]

    @check
    def error_and_the_cells_after_it():
        (error,) = outputs[5]
        assert error.output_type == "error" and error.ename == "ZeroDivisionError", error
        assert any("1 / 0" in line for line in error.traceback), error.traceback
        assert outputs[6][0].data["text/plain"] == "82", "allow_errors runs on with the state kept"

    @check
    def notebook_is_valid():
        nbformat.validate(notebook)

    # The `bash` kernel: each cell a script in the session's shell.
    bash_cells = [
        "echo hello\nprintf 'x\\ny\\n' > made.txt",
        "wc -l < made.txt",
        "echo oops >&2\nexit 3",
        "ls made.txt",
        "pip install -q tabulate && python -c 'import tabulate; print(tabulate.tabulate([[1, 2]]))'",
    ]
    bash_notebook = nbformat.v4.new_notebook()
    bash_notebook.cells = [nbformat.v4.new_code_cell(source) for source in bash_cells]
    # The gateway kernel manager starts `python3` unless `start_kernel` is
    # given the name itself.
    NotebookClient(bash_notebook, kernel_manager_class=GatewayKernelManager, kernel_name="bash", allow_errors=True, timeout=120).execute(kernel_name="bash")
    bash_outputs = [cell.outputs for cell in bash_notebook.cells]

    @check
    def bash_kernel_runs_scripts_on_the_sessions_files():
        assert bash_notebook.metadata.language_info.name == "bash", bash_notebook.metadata
        assert bash_outputs[0] == [nbformat.v4.new_output("stream", name="stdout", text="hello\n")], bash_outputs[0]
        assert "".join(o.get("text", "") for o in bash_outputs[1]).strip() == "2", bash_outputs[1]
        assert bash_outputs[3][0].text == "made.txt\n", bash_outputs[3]

    @check
    def bash_kernel_fails_a_cell_on_a_non_zero_exit():
        errors = [o for o in bash_outputs[2] if o.output_type == "error"]
        streams = [o for o in bash_outputs[2] if o.output_type == "stream"]
        assert streams and streams[0].name == "stderr" and streams[0].text == "oops\n", bash_outputs[2]
        assert errors and errors[0].ename == "CalledProcessError" and "exit status 3" in errors[0].evalue, errors

    @check
    def bash_kernel_installs_from_the_wheelhouse():
        text = "".join(o.get("text", "") for o in bash_outputs[4])
        assert "1  2" in text, bash_outputs[4]

    # The `javascript` kernel: QuickJS cells whose declarations persist.
    js_cells = [
        "let visits = 41;\nconst greet = (name) => `hello ${name}`;",
        "visits += 1;\nconsole.log(greet('nbclient'));\nvisits",
        "({ visits, list: [1, 2] })",
        "undefinedFunction()",
        "await new Promise((resolve) => setTimeout(() => resolve(visits * 2), 5))",
    ]
    js_notebook = nbformat.v4.new_notebook()
    js_notebook.cells = [nbformat.v4.new_code_cell(source) for source in js_cells]
    NotebookClient(js_notebook, kernel_manager_class=GatewayKernelManager, kernel_name="javascript", allow_errors=True, timeout=120).execute(kernel_name="javascript")
    js_outputs = [cell.outputs for cell in js_notebook.cells]

    @check
    def javascript_kernel_keeps_state_across_cells():
        assert js_notebook.metadata.language_info.name == "javascript", js_notebook.metadata
        assert js_outputs[0] == [], js_outputs[0]
        streams = [o for o in js_outputs[1] if o.output_type == "stream"]
        results = [o for o in js_outputs[1] if o.output_type == "execute_result"]
        assert streams and streams[0].text == "hello nbclient\n", js_outputs[1]
        assert results and results[0].data["text/plain"] == "42", js_outputs[1]
        assert js_outputs[2][0].data["application/json"] == {"visits": 42, "list": [1, 2]}, js_outputs[2]
        assert js_outputs[4][0].data["text/plain"] == "84", js_outputs[4]

    @check
    def javascript_kernel_reports_errors_by_name():
        errors = [o for o in js_outputs[3] if o.output_type == "error"]
        assert errors and errors[0].ename == "ReferenceError" and "undefinedFunction" in errors[0].evalue, js_outputs[3]

    run_checks()


def autogen_checks(host, port, token, output_dir):
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock
    from autogen_ext.code_executors.docker_jupyter import DockerJupyterCodeExecutor
    from autogen_ext.code_executors.docker_jupyter._jupyter_server import JupyterConnectionInfo

    info = JupyterConnectionInfo(host=host, use_https=False, port=int(port), token=token)
    output_dir = pathlib.Path(output_dir)
    results = {}

    async def run_blocks():
        async with DockerJupyterCodeExecutor(jupyter_server=info, output_dir=output_dir, timeout=120) as executor:
            for name, code in [
                ("state", "x = 20"),
                ("print", "print(x * 2)"),
                ("figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"),
                ("error", "1 / 0"),
            ]:
                results[name] = await executor.execute_code_blocks([CodeBlock(code=code, language="python")], CancellationToken())

    asyncio.run(run_blocks())

    @check
    def code_blocks_keep_state():
        assert results["state"].exit_code == 0, results["state"]
        assert results["print"].exit_code == 0 and results["print"].output.strip() == "40", results["print"]

    @check
    def a_figure_is_saved_as_a_file():
        figure = results["figure"]
        assert figure.exit_code == 0, figure
        (saved,) = figure.output_files
        assert pathlib.Path(saved).read_bytes()[1:4] == b"PNG", saved

    @check
    def an_error_is_exit_code_1():
        assert results["error"].exit_code == 1 and "ZeroDivisionError" in results["error"].output, results["error"]

    run_checks()


# How soon a close frame must be answered: a Jupyter server answers at
# once; a client that gets no answer waits for its own close timeout (10 s
# for `websockets`) and reports 1006.
CLOSE_ANSWERED_WITHIN = 2.0


def closing_checks(base_url, token):
    import websockets

    def rest(method, path):
        request = urllib.request.Request(f"{base_url}{path}?token={token}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = response.read()
                return response.status, json.loads(body) if body else None
        except urllib.error.HTTPError as error:
            return error.code, None

    def start_kernel():
        request = urllib.request.Request(f"{base_url}/api/kernels?token={token}", data=json.dumps({"name": "python3-stdlib"}).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["id"]

    def message(msg_type, content):
        header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "checks", "session": uuid.uuid4().hex, "date": "", "version": "5.3"}
        return header["msg_id"], json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"})

    async def until(ws, msg_id, done):
        while True:
            frame = json.loads(await ws.recv())
            if frame["parent_header"].get("msg_id") == msg_id and done(frame):
                return frame

    async def closed_by_client(kernel, during_cell):
        url = f"{base_url.replace('http', 'ws', 1)}/api/kernels/{kernel}/channels?token={token}"
        async with websockets.connect(url, close_timeout=10) as ws:
            if during_cell:
                msg_id, frame = message("execute_request", {"code": "import time\nprint('running', flush=True)\ntime.sleep(30)", "silent": False})
                await ws.send(frame)
                await until(ws, msg_id, lambda f: f["msg_type"] == "stream")
            else:
                msg_id, frame = message("kernel_info_request", {})
                await ws.send(frame)
                await until(ws, msg_id, lambda f: f["msg_type"] == "kernel_info_reply")
            started = time.monotonic()
            await ws.close()
            return time.monotonic() - started, ws.close_code

    def assert_answered(name, elapsed, received):
        print(f"TIME {name} {elapsed:.3f}", flush=True)
        assert received == 1000, f"the close code the server answered with: {received} (1006: no close frame)"
        assert elapsed < CLOSE_ANSWERED_WITHIN, f"answered {elapsed:.2f} s after the client closed"

    @check
    def an_idle_socket_closed_by_the_client_is_answered_with_1000():
        kernel = start_kernel()
        elapsed, received = asyncio.run(closed_by_client(kernel, during_cell=False))
        assert_answered("idle_close", elapsed, received)
        assert rest("DELETE", f"/api/kernels/{kernel}")[0] == 204

    @check
    def a_socket_closed_during_a_cell_is_answered_at_once_and_the_cell_goes_on():
        kernel = start_kernel()
        elapsed, received = asyncio.run(closed_by_client(kernel, during_cell=True))
        assert_answered("close_during_cell", elapsed, received)
        status, model = rest("GET", f"/api/kernels/{kernel}")
        assert status == 200 and model["execution_state"] == "busy", ("the cell goes on, as on a Jupyter server", model)
        assert rest("DELETE", f"/api/kernels/{kernel}")[0] == 204

    @check
    def a_kernel_shut_down_closes_its_sockets_with_1000():
        kernel = start_kernel()

        async def open_then_delete():
            url = f"{base_url.replace('http', 'ws', 1)}/api/kernels/{kernel}/channels?token={token}"
            async with websockets.connect(url, close_timeout=10) as ws:
                msg_id, frame = message("execute_request", {"code": "import time\nprint('running', flush=True)\ntime.sleep(30)", "silent": False})
                await ws.send(frame)
                await until(ws, msg_id, lambda f: f["msg_type"] == "stream")
                started = time.monotonic()
                status = await asyncio.to_thread(lambda: rest("DELETE", f"/api/kernels/{kernel}")[0])
                async def drain():
                    try:
                        while True:
                            await ws.recv()
                    except websockets.ConnectionClosed:
                        pass

                # Bounded: a socket left open fails the check instead of hanging it.
                try:
                    await asyncio.wait_for(drain(), 15)
                except asyncio.TimeoutError:
                    pass
                return status, time.monotonic() - started, ws.close_code

        status, elapsed, received = asyncio.run(open_then_delete())
        print(f"TIME delete_busy_kernel_closes_socket {elapsed:.3f}", flush=True)
        assert status == 204, status
        assert received == 1000, f"the close code the server sent: {received} (1006: no close frame)"
        assert elapsed < CLOSE_ANSWERED_WITHIN, f"closed {elapsed:.2f} s after the DELETE"
        assert rest("GET", f"/api/kernels/{kernel}")[0] == 404

    run_checks()


if __name__ == "__main__":
    if sys.argv[1:2] == ["nbclient"]:
        nbclient_checks(*sys.argv[2:4])
    elif sys.argv[1:2] == ["autogen"]:
        autogen_checks(*sys.argv[2:6])
    elif sys.argv[1:2] == ["closing"]:
        closing_checks(*sys.argv[2:4])
    else:
        sys.exit(__doc__)
