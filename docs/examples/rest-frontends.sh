#!/usr/bin/env bash
# What a frontend written for json-server, react-admin or Refine sends, and
# what it gets. Each `grep` prints the answer and fails if it differs.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}
json='content-type: application/json'

for post in '{"title": "alpha", "views": 5}' '{"title": "beta", "views": 10}' '{"title": "Alpine", "views": 1}'; do
  curl -fsS -X POST "$APP/posts/" -H "$json" -d "$post" >/dev/null
done
curl -fsS -X POST "$APP/posts/1/comments" -H "$json" -d '{"body": "first"}' | grep '"postId":1'

# A plain list is a bare array; the total is in X-Total-Count and Content-Range.
curl -fsS -D - "$APP/posts" | grep -i '^x-total-count: 3'
curl -fsS "$APP/posts" | grep '^\[{"id":1,"title":"alpha","views":5},'

# json-server's vocabulary: sort, window, operators, search, any-of, embed.
curl -fsS "$APP/posts?_sort=views&_order=desc&_start=0&_end=2" | grep '"title":"beta".*"title":"alpha"'
curl -fsS "$APP/posts?title_like=%5Eal" | grep -v beta | grep '"title":"Alpine"'
curl -fsS "$APP/posts?id=1&id=3&_embed=comments" | grep '"comments":\[{"body":"first","id":1,"postId":1}\]'
curl -fsS -D - -o /dev/null "$APP/posts?_page=1&_limit=2" | grep -i '^link: .*rel="next"'

# ra-data-simple-rest's JSON parameters and Range header: 206 and Content-Range.
curl -sS -D - -o /dev/null -H 'range: posts=0-1' "$APP/posts?range=%5B0%2C1%5D" | grep -i '^content-range: posts 0-1/3'

# A malformed control is a 400 that names it, never an empty list.
curl -sS "$APP/posts?range=%5B0" | grep '"code":"bad_request"' | grep -F '`range`'

# A form posts directly; a DELETE answers the record when asked.
curl -fsS -X POST "$APP/posts/" -d 'title=from+a+form' | grep '"title":"from a form"'
curl -fsS -X DELETE -H 'prefer: return=representation' "$APP/posts/4" | grep '"title":"from a form"'
