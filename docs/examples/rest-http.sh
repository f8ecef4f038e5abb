#!/usr/bin/env bash
# What the REST face says besides the body: Location, Allow, the request id
# and the error envelope.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}
json='content-type: application/json'

# 201 with Location; every answer carries x-request-id.
curl -fsS -i -X POST "$APP/members/" -H "$json" -d '{"name": "Alice"}' > created.txt
grep -i '^HTTP/1.1 201' created.txt
grep -i '^location: /members/1' created.txt
grep -i '^x-request-id: ' created.txt

# OPTIONS lists exactly what the path accepts; any other method is 405.
curl -fsS -i -X OPTIONS "$APP/members/" | grep -i '^allow: GET, HEAD, POST, OPTIONS'
curl -fsS -i -X OPTIONS "$APP/members/1" | grep -i '^allow: GET, HEAD, PUT, PATCH, DELETE, OPTIONS'
curl -sS -o /dev/null -w '%{http_code}\n' -X DELETE "$APP/members/" | grep -x 405

# HEAD answers like GET, without a body.
curl -fsS -I "$APP/members/1" | grep -i '^content-length: '

# Every error is {"error": {"code", "message", "request_id"}}.
curl -sS "$APP/members/99" | grep '^{"error":{"code":"not_found","message":"[^"]*","request_id":"[0-9a-f]*"}}$'
curl -sS -X POST "$APP/members/" -H "$json" -d '{"name": ' | grep '"code":"bad_request","message":"malformed JSON body'

# Tenants never see each other's collections.
curl -fsS "$APP/members/?limit=10" -H 'x-session-id: other' | grep '"total":0'
