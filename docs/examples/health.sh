#!/usr/bin/env bash
# The gateway's own paths: liveness with the planner's mode, readiness with
# each sandbox host's state, and the OpenAPI document.
set -euo pipefail
APP=${APP:-http://127.0.0.1:3000}

curl -fsS "$APP/healthz" | grep '"planner_mode":"rules"'
curl -fsS "$APP/readyz" | grep '"ready":true'
curl -fsS "$APP/openapi.json" | grep '"openapi":"3'
