"""Jupyter's own Python clients (pinned in `.venv-jupyter` by `cargo xtask
test`) against anypath's kernels, unchanged, as their users run them.

Usage: jupyter_client_checks.py nbclient GATEWAY_URL TOKEN
       jupyter_client_checks.py autogen HOST PORT TOKEN OUTPUT_DIR

`nbclient` executes a notebook through jupyter_server's
`GatewayKernelManager` (what papermill and `jupyter nbconvert --execute`
do with `--gateway-url`); `autogen` runs code blocks with AutoGen's
`DockerJupyterCodeExecutor` pointed at anypath instead of a container.
Every check runs, failed or not; each prints `PASS name` or `FAIL name`
with its traceback; the last line is `N checks passed` when all did, and
the exit status is 1 when any failed.
"""

import asyncio
import base64
import pathlib
import sys
import traceback

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
    manager = GatewayKernelManager(kernel_name="python3")
    NotebookClient(notebook, km=manager, allow_errors=True, timeout=120).execute()
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["nbclient"]:
        nbclient_checks(*sys.argv[2:4])
    elif sys.argv[1:2] == ["autogen"]:
        autogen_checks(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
