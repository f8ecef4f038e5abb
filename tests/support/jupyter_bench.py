"""Times Jupyter's kernel protocol on one server, as a client sees it.

Usage: jupyter_bench.py BASE_URL TOKEN KERNEL_NAME STARTS ROUND_TRIPS

Prints JSON: `start_ms` (POST /api/kernels, the websocket opened, and the
first `1 + 1` answered, once per kernel started) and `round_trip_ms`
(`1 + 1`, execute_request sent to execute_reply read, on one kernel).
Run against anypath's sandbox listener and against `jupyter server` with a
native ipykernel, the same client measures both.
"""

import json
import socket
import sys
import time
import urllib.request
import uuid

import websocket

BASE, TOKEN, KERNEL, STARTS, TRIPS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
HEADERS = {"Authorization": f"token {TOKEN}", "Content-Type": "application/json"}


def call(method, path, body=None):
    request = urllib.request.Request(BASE + path, method=method, headers=HEADERS, data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(request) as response:
        data = response.read()
        return json.loads(data) if data else None


def execute(ws, code):
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench", "session": "bench", "version": "5.3"}
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
    ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell", "buffers": []}))
    while True:
        message = json.loads(ws.recv())
        if message.get("channel") == "shell" and message["parent_header"].get("msg_id") == msg_id:
            assert message["content"]["status"] == "ok", message["content"]
            return


def open_kernel():
    kernel = call("POST", "/api/kernels", {"name": KERNEL})
    # Without TCP_NODELAY each small frame waits for a delayed ACK (40 ms).
    ws = websocket.create_connection(
        f"{BASE.replace('http', 'ws', 1)}/api/kernels/{kernel['id']}/channels?token={TOKEN}",
        sockopt=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    )
    return kernel, ws


def main():
    starts, trips = [], []
    for _ in range(STARTS):
        began = time.perf_counter()
        kernel, ws = open_kernel()
        execute(ws, "1 + 1")
        starts.append((time.perf_counter() - began) * 1e3)
        ws.close()
        call("DELETE", f"/api/kernels/{kernel['id']}")
    kernel, ws = open_kernel()
    for _ in range(10):
        execute(ws, "1 + 1")
    for _ in range(TRIPS):
        began = time.perf_counter()
        execute(ws, "1 + 1")
        trips.append((time.perf_counter() - began) * 1e3)
    ws.close()
    call("DELETE", f"/api/kernels/{kernel['id']}")
    print(json.dumps({"start_ms": starts, "round_trip_ms": trips}))


main()
