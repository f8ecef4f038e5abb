#!/usr/bin/env bash
# The python-data runtime: pandas and matplotlib in a session, the chart
# kept as an artifact.
set -euo pipefail
SANDBOX=${SANDBOX:-http://127.0.0.1:3001}
S=$SANDBOX/v1/sessions/sales
json='content-type: application/json'

curl -fsS -X POST "$SANDBOX/v1/sessions" -H "$json" -d '{"session_id": "sales", "runtime": "python-data"}' \
  | grep '"runtime":"python-data"'
printf 'region,amount\nnorth,10\nsouth,20\nnorth,5\n' > sales.csv
curl -fsS -X PUT "$S/files/sales.csv" --data-binary @sales.csv | grep '"size_bytes":40'
curl -fsS -X POST "$S/run" -H "$json" -d '{"code":
  "import pandas as pd, matplotlib.pyplot as plt\ndf = pd.read_csv(\"sales.csv\")\ndf.groupby(\"region\").amount.sum().plot.bar().figure.savefig(\"chart.png\")"}' \
  | grep '"filename":"chart.png","size_bytes":[0-9]*,"mime_type":"image/png"'
# The DataFrame is still in memory:
curl -fsS -X POST "$S/run" -H "$json" -d '{"code": "print(df.amount.sum())"}' | grep '"stdout":"35\\n"'
