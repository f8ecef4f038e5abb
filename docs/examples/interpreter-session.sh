#!/usr/bin/env bash
# A code-interpreter session: upload a CSV, run code on it, and run again
# with the variables of the last run still in memory.
set -euo pipefail
SANDBOX=${SANDBOX:-http://127.0.0.1:3001}
S=$SANDBOX/v1/sessions/demo
json='content-type: application/json'

printf 'region,amount\nnorth,10\nsouth,20\nnorth,5\n' > sales.csv
b64=$(python3 -c 'import base64, sys; print(base64.b64encode(sys.stdin.buffer.read()).decode())' < sales.csv)
curl -fsS -X POST "$S/files" -H "$json" -d "{\"filename\": \"sales.csv\", \"content_base64\": \"$b64\"}" \
  | grep '"path":"/mnt/data/sales.csv"'

curl -fsS -X POST "$S/run" -H "$json" \
  -d '{"code": "import csv\nrows = list(csv.DictReader(open(\"sales.csv\")))\nprint(len(rows))"}' \
  | grep '"exit_code":0,"stdout":"3\\n"'
# rows is still there:
curl -fsS -X POST "$S/run" -H "$json" -d '{"code": "print(rows[0][\"region\"])"}' | grep '"stdout":"north\\n"'

# A failing run reports the code's own traceback; the session lives on.
curl -fsS -X POST "$S/run" -H "$json" -d '{"code": "1 / 0"}' | grep '"exit_code":1,.*"error":{"kind":"exception","type_name":"ZeroDivisionError"'

# Files the code writes come back as artifacts with signed download links.
curl -fsS -X POST "$S/run" -H "$json" -d '{"code": "open(\"total.txt\", \"w\").write(\"35\")"}' > run.json
grep '"filename":"total.txt"' run.json
url=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["artifacts"][0]["download_url"])' < run.json)
curl -fsS "$url" | grep -x 35

curl -fsS -X DELETE "$S" | grep '"status":"closed"'
