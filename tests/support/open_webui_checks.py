"""Open WebUI's own Jupyter client, unchanged, against anypath's kernels:
`open_webui/utils/code_interpreter.py` of a pinned Open WebUI release
(fetched by `cargo xtask test` into target/open-webui/), driven as Open
WebUI's code interpreter drives it: `execute_code_jupyter(url, code,
token, password, timeout)` once per code block, each call starting a
kernel, running the block over the kernel's websocket, and deleting the
kernel.

Usage: open_webui_checks.py MODULE_DIR BASE_URL TOKEN OTHER_TENANTS_TOKEN

The module imports two other modules of Open WebUI that only pick
settings: `open_webui.env` (the whole app's configuration, which imports
the app's own dependencies at import time) and
`open_webui.utils.json_codec` (which picks orjson or the standard
library's json from that configuration). They cannot be imported without
installing the whole app, so they are stood in for here with what they
give this module: `AIOHTTP_CLIENT_ALLOW_REDIRECTS`, read from the
environment as Open WebUI reads it, and `JSONCodec`, the standard
library's json (Open WebUI's own choice with `ENABLE_ORJSON=false`).
The client module itself is Open WebUI's, byte for byte.

Every check runs, failed or not; each prints `PASS name` or `FAIL name`
with its traceback; timings print as `TIME name seconds`; the last line is
`N checks passed` when all did, and the exit status is 1 when any failed.
"""

import asyncio
import json
import os
import pathlib
import sys
import time
import traceback
import types
import urllib.request

CHECKS = []

# How far past its timeout a timed-out call may return: the goal is one
# second; the bound leaves room for a loaded two-core machine.
TIMEOUT_SLACK = 3.0


def check(run):
    CHECKS.append(run)
    return run


def load_client(module_dir):
    """Open WebUI's `code_interpreter` module, its settings modules stood in for."""
    package = pathlib.Path(module_dir) / "open_webui"
    open_webui = types.ModuleType("open_webui")
    open_webui.__path__ = [str(package)]
    utils = types.ModuleType("open_webui.utils")
    utils.__path__ = [str(package / "utils")]
    env = types.ModuleType("open_webui.env")
    env.AIOHTTP_CLIENT_ALLOW_REDIRECTS = os.getenv("AIOHTTP_CLIENT_ALLOW_REDIRECTS", "False").lower() == "true"
    codec = types.ModuleType("open_webui.utils.json_codec")
    codec.JSONCodec = json
    for module in (open_webui, utils, env, codec):
        sys.modules[module.__name__] = module
    open_webui.utils, open_webui.env, utils.json_codec = utils, env, codec
    from open_webui.utils import code_interpreter

    return code_interpreter


def kernels(base_url, token):
    """The kernels the holder of `token` has now."""
    with urllib.request.urlopen(f"{base_url}/api/kernels?token={token}", timeout=30) as response:
        return json.load(response)


def main(module_dir, base_url, token, other_token):
    client = load_client(module_dir)

    def block(code, timeout=60, as_token=token):
        """One code block, as Open WebUI runs it; its result and seconds taken."""
        started = time.monotonic()
        result = asyncio.run(client.execute_code_jupyter(base_url, code, as_token, "", timeout))
        return result, time.monotonic() - started

    @check
    def a_block_prints_and_returns_its_value():
        result, _ = block("print('hello from a block')\n6 * 7")
        assert result == {"stdout": "hello from a block", "stderr": "", "result": "42"}, result
        assert kernels(base_url, token) == [], "the block's kernel was deleted"

    @check
    def a_file_written_in_one_block_is_read_in_the_next():
        written, _ = block("with open('from-block-one.txt', 'w') as f:\n    f.write('written by block one')\nprint('written')")
        assert written["stdout"] == "written", written
        assert kernels(base_url, token) == [], "each block has a kernel of its own, deleted after it"
        read, _ = block("print(open('from-block-one.txt').read())")
        assert read["stdout"] == "written by block one", read

    @check
    def another_tenants_blocks_never_see_the_files():
        # Boundary: tenants. The file of the check above is alice's alone.
        result, _ = block("import os\nprint(os.path.exists('from-block-one.txt'), sorted(os.listdir('.')))", as_token=other_token)
        assert result["stdout"].startswith("False"), result

    @check
    def an_error_block_reports_the_error():
        result, _ = block("values = [1, 2]\nvalues[5]")
        assert "IndexError" in result["stderr"] and "list index out of range" in result["stderr"], result
        assert kernels(base_url, token) == [], "the failed block's kernel was deleted"

    @check
    def a_figure_comes_back_as_an_image():
        result, _ = block("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
        assert result["result"].startswith("data:image/png;base64,iVBOR"), result["result"][:80]

    @check
    def a_block_past_its_timeout_returns_within_it_and_its_kernel_is_deleted():
        timeout = 3
        result, elapsed = block("import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('never')", timeout=timeout)
        print(f"TIME timed_out_block {elapsed:.2f} (timeout {timeout} s)", flush=True)
        assert result["stdout"] == "started" and result["stderr"] == "Execution timed out.", result
        assert elapsed < timeout + TIMEOUT_SLACK, f"returned {elapsed:.2f} s after it started, timeout {timeout} s"
        assert kernels(base_url, token) == [], "the timed-out block's kernel was deleted"
        after, _ = block("print('the next block runs')")
        assert after["stdout"] == "the next block runs", after

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


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:5])
