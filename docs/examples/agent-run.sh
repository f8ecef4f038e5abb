#!/usr/bin/env bash
# The agent endpoint: a task in plain words; the model works in a sandbox
# session with file and test tools. Needs an LLM (see the page's set-up);
# the test suite runs this against a scripted model.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}
json='content-type: application/json'

curl -fsS -X POST "$APP/run" -H "$json" -d '{"input": "List files in sandbox"}' \
  | grep '"session_id":"run-'

# includeSteps shows each tool call and what it returned.
curl -fsS -X POST "$APP/run" -H "$json" -d '{"input": "Write hello.txt", "includeSteps": true}' > run.json
grep '"tool":"write_file"' run.json
grep -o '"observation":"wrote [0-9]* bytes to hello.txt"' run.json

# A path leaving the session directory is an error the model reads, not a file.
curl -fsS -X POST "$APP/run" -H "$json" -d '{"input": "Show me ../../etc/passwd", "includeSteps": true}' \
  | grep '"observation":"error: path escapes the sandbox: ../../etc/passwd"'
