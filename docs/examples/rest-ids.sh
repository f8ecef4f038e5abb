#!/usr/bin/env bash
# A client may choose its ids; Location and every path the app builds
# percent-encode them, and a GET of that path finds the record.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}
json='content-type: application/json'

curl -fsS -i -X POST "$APP/things/" -H "$json" -d '{"id": "café"}' | grep -i '^location: /things/caf%C3%A9'
curl -fsS -i -X POST "$APP/things/" -H "$json" -d '{"id": "a/b"}' | grep -i '^location: /things/a%2Fb'
curl -fsS "$APP/things/a%2Fb" | grep '^{"id":"a/b"}$'

# 7.0 is the integer 7; an id outside the rules is a 400 before any block runs.
curl -fsS -X POST "$APP/things/" -H "$json" -d '{"id": 7.0}' | grep '^{"id":7}$'
curl -sS -o /dev/null -w '%{http_code}\n' -X POST "$APP/things/" -H "$json" -d '{"id": "search"}' | grep -x 400
