"""Serve a GGUF model over llama.cpp's OpenAI-compatible HTTP API (xllamacpp).

    python llama_server.py --model PATH [--port N] [--threads N] [--ctx N] [--parallel N]

Once `GET /health` answers 200 it prints one JSON line to stdout,
`{"message": "llm serving", "listen": "127.0.0.1:PORT"}`, and serves until it
is killed or its standard input closes (so it never outlives the test that
started it). Port 0 lets the server bind a free port itself and report it.
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

import xllamacpp as xlc

HOST = "127.0.0.1"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096, help="context window in tokens, per request")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="requests decoded together, each with its own context window (suites sharing one server)",
    )
    return parser.parse_args()


def start(args):
    params = xlc.CommonParams()
    params.model.path = args.model
    # Each slot gets its own window: llama.cpp splits n_ctx between the slots.
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx * args.parallel
    params.cpuparams.n_threads = args.threads
    params.hostnames = [HOST]
    params.port = args.port
    params.ui = False
    # The model's own chat template, which also enables `response_format`.
    params.use_jinja = True
    # The constructor loads the model and starts the HTTP server on its own threads.
    return xlc.Server(params)


def bound_port(server, asked):
    """The port the server bound: the one asked for, or the one it picked for 0."""
    address = server.listening_address
    port = int(address.rsplit(":", 1)[1].rstrip("/"))
    if port == 0 or (asked and port != asked):
        raise SystemExit(f"llama server reports {address!r}, asked for port {asked}")
    return port


def wait_healthy(port, timeout=120.0):
    deadline = time.monotonic() + timeout
    url = f"http://{HOST}:{port}/health"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.2)


def main():
    args = parse_args()
    server = start(args)
    port = bound_port(server, args.port)
    wait_healthy(port)
    print(json.dumps({"message": "llm serving", "listen": f"{HOST}:{port}"}), flush=True)
    # Block until the parent closes our stdin (or exits); the server lives as long as `server`.
    for _ in sys.stdin:
        pass
    del server


if __name__ == "__main__":
    main()
