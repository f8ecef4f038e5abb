#!/usr/bin/env bash
# Create, read, search, page, replace, patch and delete on a collection
# nobody declared. Each `grep` prints the answer and fails if it differs.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}
json='content-type: application/json'

curl -fsS -X POST "$APP/members/" -H "$json" -d '{"name": "Alice"}' | grep '^{"id":1,"name":"Alice"}$'
curl -fsS -X POST "$APP/members/" -H "$json" -d '{"name": "Bob Hartmann", "age": 40}' | grep '"id":2'
curl -fsS "$APP/members/1" | grep '^{"id":1,"name":"Alice"}$'

# Exact matches, and operators: name__contains=, name__icontains=, age__gt=, ...
curl -fsS "$APP/members/search?name=Alice" | grep '^\[{"id":1,"name":"Alice"}\]$'
curl -fsS "$APP/members/search?name__icontains=hartmann" | grep '"name":"Bob Hartmann"'
curl -fsS "$APP/members/search?age__gt=30" | grep '^\[{"age":40,"id":2,"name":"Bob Hartmann"}\]$'

# Paging and sorting: sort=-age is descending.
curl -fsS "$APP/members/?limit=1&offset=0&sort=-age" \
  | grep '"items":\[{"age":40,"id":2,"name":"Bob Hartmann"}\],"page":{"limit":1,"offset":0,"total":2}'

curl -fsS -X PUT "$APP/members/1" -H "$json" -d '{"name": "Alicia"}' | grep '^{"id":1,"name":"Alicia"}$'
curl -fsS -X PATCH "$APP/members/1" -H "$json" -d '{"age": 31}' | grep '^{"age":31,"id":1,"name":"Alicia"}$'
curl -fsS -o /dev/null -w '%{http_code}\n' -X DELETE "$APP/members/1" | grep -x 204
curl -sS -o /dev/null -w '%{http_code}\n' "$APP/members/1" | grep -x 404
