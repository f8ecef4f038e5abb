#!/usr/bin/env bash
# One REST block run directly on the sandbox host, as the gateway runs it:
# the block, the request context and the collections it may read. The
# answer is the reply and the journal of changes; nothing is stored.
set -euo pipefail
SANDBOX=${SANDBOX:-http://127.0.0.1:3001}

curl -fsS "$SANDBOX/v1/exec" -H 'content-type: application/json' -d '{
  "code": "obj = dict(ctx[\"body_json\"])\nnew_id = store.insert(obj)\nREPLY = {\"status\": 201, \"headers\": {\"Location\": f\"/members/{new_id}\"}, \"body\": obj}",
  "ctx": {"method": "POST", "path": "/members/", "body_json": {"name": "Alice"}},
  "collections": [{"name": "members", "version": 3, "documents": [{"id": 1, "name": "Bob"}]}]
}' > report.json
grep '"ok":true' report.json
grep '"headers":\[\["Location","/members/2"\]\]' report.json
grep '"mutations":\[{"collection":"members","op":"insert","id":2' report.json

# A block the policy gate refuses never runs.
curl -fsS "$SANDBOX/v1/exec" -H 'content-type: application/json' \
  -d '{"code": "import os\nREPLY = {\"status\": 200, \"body\": os.listdir(\"/\")}"}' \
  | grep '"kind":"policy"'
