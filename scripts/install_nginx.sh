#!/usr/bin/env bash
# Debian's nginx, the front proxy of the gateway-replica test (tests/e2e/test_gateway_replicas.py:
# two gateways behind `hash $http_x_claude_code_session_id consistent`). The test starts its own
# nginx on 127.0.0.1 with its own config; the package's service is not used. Idempotent.
set -euo pipefail
source "$(dirname "$0")/_apt.sh"
NGINX=/usr/sbin/nginx
apt_ensure nginx "$NGINX" nginx-light
echo "[nginx] $("$NGINX" -v 2>&1) at $NGINX"
