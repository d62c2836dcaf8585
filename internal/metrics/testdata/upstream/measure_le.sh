#!/usr/bin/env bash
# Measures whether upstream's own PromQL, which names bucket bounds as its
# Python client writes them (le="524288.0"), finds flecht's series: a real
# Prometheus scrapes an upstream stage's metrics (flechtwerk 0.17's Metrics
# and PrometheusObserver in the upstream chroot) and flecht's, served once
# as the classic text format only and once through Observer.Handler, then
# the same queries run against all three. Needs root (chroot), prometheus
# and go. Usage: measure_le.sh [BASE_PORT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
chroot_dir=${FLECHT_UPSTREAM_CHROOT:-/work/upstream/chroot}
base=${1:-39301}
py=$base text=$((base + 1)) om=$((base + 2)) prom=$((base + 3))
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

chroot "$chroot_dir" /opt/fw/bin/python - "$py" <<'PY' &
import sys, time
from prometheus_client import CollectorRegistry, start_http_server
from flechtwerk.metrics import Metrics
from flechtwerk.observer import PrometheusObserver
m = Metrics(); m.max_poll_records = 500; m.metrics_labels = {"stage": "s"}; m.registry = CollectorRegistry()
o = PrometheusObserver(); o.metrics = m; o.metrics_labels = m.metrics_labels
o.state_record_bytes(600000)
o.message_in_bytes("in", 600000)
start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=m.registry)
time.sleep(3600)
PY
pids+=($!)
(cd "$root" && go build -o "$work/leprobe" ./internal/metrics/testdata/leprobe)
"$work/leprobe" "127.0.0.1:$text" "127.0.0.1:$om" &
pids+=($!)

cat >"$work/prometheus.yml" <<YML
global: {scrape_interval: 1s}
scrape_configs:
  - {job_name: upstream, static_configs: [{targets: ["127.0.0.1:$py"]}]}
  - {job_name: flecht-text-only, static_configs: [{targets: ["127.0.0.1:$text"]}]}
  - {job_name: flecht-handler, static_configs: [{targets: ["127.0.0.1:$om"]}]}
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom" >"$work/prometheus.log" 2>&1 &
pids+=($!)

query() {
  curl -sfG "http://127.0.0.1:$prom/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; print(" ".join(sorted(r["metric"]["job"] for r in json.load(sys.stdin)["data"]["result"])) or "-")'
}
for _ in $(seq 60); do
  [ "$(query 'count by (job) (up == 1)' 2>/dev/null | wc -w)" = 3 ] && break
  sleep 1
done
sleep 3
echo "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}')"
for q in 'flechtwerk_state_record_bytes_bucket{le="524288.0"}' 'flechtwerk_state_record_bytes_bucket{le="524288"}' \
  'flechtwerk_state_record_bytes_bucket{le="1.048576e+06"}' 'flechtwerk_message_in_bytes_bucket{le="655360.0"}'; do
  printf '%-60s %s\n' "$q" "$(query "$q")"
done
for t in "$py" "$text" "$om"; do
  printf 'scrape of :%s, Accept as Prometheus sends it: %s\n' "$t" \
    "$(curl -s -H 'Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1' \
      "http://127.0.0.1:$t/metrics" | grep -m1 -o 'flechtwerk_state_record_bytes_bucket{[^}]*le="524288[^"]*"[^}]*}')"
done
