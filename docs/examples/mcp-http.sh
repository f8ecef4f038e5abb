#!/usr/bin/env bash
# The code interpreter over MCP (Streamable HTTP), spoken by hand: list the
# tools, then run a cell. An MCP client does the same.
set -euo pipefail
SANDBOX=${SANDBOX:-http://127.0.0.1:3001}
mcp() {
  curl -fsS "$SANDBOX/mcp" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -d "$1"
}

mcp '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}' | grep -o '"name":"run_python"'
mcp '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_python",
      "arguments": {"session_id": "mcp-demo", "code": "x = 6 * 7\nprint(x)"}}}' \
  | grep -o '"structuredContent":{[^}]*"exit_code":0'
mcp '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run_python",
      "arguments": {"session_id": "mcp-demo", "code": "print(x + 1)"}}}' \
  | grep -o '"stdout":"43\\n"'
