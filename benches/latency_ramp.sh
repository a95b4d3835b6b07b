#!/usr/bin/env bash
# An open-loop latency ramp (issue 11), as Yandex.Tank's `step` load does: fixed request rates
# in steps (START, START+STEP, ... up to MAX_RATE), STEP_SECONDS each after WARMUP_SECONDS at
# START (not recorded), against edgecache, HAProxy's cache and Varnish in turn, all caching
# the same 510-byte object (`/small`, max-age=3600) from one nginx origin (127.0.0.1:19550).
# A server's ramp ends at the first step with errors, or where it (or the generator) served
# under 95% of the offered rate.
#
# The generator is oha (installed by this script from crates.io into target/bench-tools):
# `-q RATE` sends at a fixed rate whatever the answers do, and `--latency-correction` measures
# each request from when it was due, not from when a free connection sent it, so a stall
# shows in the percentiles instead of lowering the rate (coordinated omission). CONNECTIONS
# (default 100) keep-alive HTTP/1.1 connections. Servers get one worker each and run on CPU 0
# (Varnish, thread-per-connection, one thread pool confined to it), oha and the origin on CPU
# 1, as ../shared/bench/peers.sh does. Each server runs only during its own ramp.
#
# Writes OUT.tsv (server, offered rate, achieved rate, p50/p99/p99.9 in ms, errors, non-2xx,
# origin requests during the step) and draws OUT.svg with benches/plot_latency_ramp.py.
#
#   cargo build --release && [START=10000 STEP=10000 MAX_RATE=200000 STEP_SECONDS=10 WARMUP_SECONDS=5 \
#       CONNECTIONS=100 SERVERS=edgecache,haproxy,varnish OUT=docs/latency-ramp] \
#       benches/latency_ramp.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/edgecache}")
START=${START:-10000}
STEP=${STEP:-10000}
MAX_RATE=${MAX_RATE:-200000}
STEP_SECONDS=${STEP_SECONDS:-10}
WARMUP_SECONDS=${WARMUP_SECONDS:-5}
CONNECTIONS=${CONNECTIONS:-100}
SERVERS=${SERVERS:-edgecache,haproxy,varnish}
OUT=${OUT:-docs/latency-ramp}
OHA_VERSION=1.16.0
for tool in nginx haproxy varnishd taskset python3 curl cargo; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx haproxy varnish util-linux)" >&2; exit 1; }
done
OHA=target/bench-tools/bin/oha
if ! { [ -x "$OHA" ] && "$OHA" --version | grep -q "$OHA_VERSION"; }; then
    cargo install oha --locked --version "$OHA_VERSION" --root target/bench-tools
fi
OUT=$(realpath -m "$OUT")
. benches/run_dir.sh ramp
chmod 755 "$RUN"

BODY=$(printf 'G%.0s' $(seq 510))
cat >"$RUN/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $RUN/nginx.pid; error_log $RUN/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:19550;
        location = /small {
            default_type image/gif;
            add_header Cache-Control "max-age=3600";
            return 200 "$BODY";
        }
        location = /origin_status { stub_status; }
    }
}
EOF
taskset -c 1 nginx -c "$RUN/nginx.conf" & PIDS+=($!)

cat >"$RUN/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    option http-keep-alive
cache ramp
    total-max-size 256
    max-age 3600
frontend fe
    bind 127.0.0.1:19552
    http-request cache-use ramp
    http-response cache-store ramp
    default_backend origin
backend origin
    http-reuse always
    server o1 127.0.0.1:19550
EOF
mkdir "$RUN/varnish"
chmod 777 "$RUN/varnish"
cat >"$RUN/varnish.vcl" <<'EOF'
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "19550"; }
EOF

origin_requests() {
    curl -s http://127.0.0.1:19550/origin_status | awk 'NR == 3 {print $3}'
}

start() {   # server: starts it on CPU 0; sets PORT and SERVER_PID
    case $1 in
        edgecache)
            RUST_LOG=warn taskset -c 0 "$BIN" -a 127.0.0.1:19551 -b 127.0.0.1:19550 --threads 1 \
                --no-watch -T off 2>"$RUN/edgecache.log" &
            PORT=19551 ;;
        haproxy)
            taskset -c 0 haproxy -db -f "$RUN/haproxy.cfg" >"$RUN/haproxy.log" 2>&1 &
            PORT=19552 ;;
        varnish)
            taskset -c 0 varnishd -F -n "$RUN/varnish/work" -a 127.0.0.1:19553 -f "$RUN/varnish.vcl" \
                -s malloc,256m -p thread_pools=1 >"$RUN/varnish.log" 2>&1 &
            PORT=19553 ;;
        *) echo "unknown server $1 (edgecache, haproxy, varnish)" >&2; exit 2 ;;
    esac
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}

offer() {   # seconds rate: one step against $PORT, its JSON summary on stdout
    # -w: requests in flight at the deadline are answered and counted, not errors.
    taskset -c 1 "$OHA" -z "$1s" -w -q "$2" --latency-correction -c "$CONNECTIONS" \
        --no-tui --output-format json "http://127.0.0.1:$PORT/small"
}

printf 'server\trate\tachieved\tp50_ms\tp99_ms\tp999_ms\terrors\tnon_2xx\torigin_requests\n' >"$OUT.tsv"
echo "| server | offered rps | achieved rps | p50 ms | p99 ms | p99.9 ms | errors | non-2xx | origin requests |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for server in ${SERVERS//,/ }; do
    start "$server"
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/small" && break; sleep 0.2; done
    curl -s -o /dev/null "http://127.0.0.1:$PORT/small"   # stored by now
    # Not recorded: Varnish starts its worker threads as load arrives, and every server's
    # first requests open the connections.
    offer "$WARMUP_SECONDS" "$START" >/dev/null
    rate=$START
    while [ "$rate" -le "$MAX_RATE" ]; do
        before=$(origin_requests)
        offer "$STEP_SECONDS" "$rate" >"$RUN/step.json"
        # Less the status request itself.
        origin=$(($(origin_requests) - before - 1))
        line=$(python3 - "$RUN/step.json" "$server" "$rate" "$origin" <<'EOF'
import json, sys
step = json.load(open(sys.argv[1]))
server, rate, origin = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
codes = step.get("statusCodeDistribution", {})
ok = sum(n for code, n in codes.items() if code.startswith("2"))
non_2xx = sum(codes.values()) - ok
errors = sum(step.get("errorDistribution", {}).values())
if errors:
    print(f"{server} at {rate}/s: {step['errorDistribution']}", file=sys.stderr)
achieved = ok / step["summary"]["total"]
percentiles = step["latencyPercentiles"]
ms = [1000 * (percentiles[p] or 0) for p in ("p50", "p99", "p99.9")]
print("\t".join([server, str(rate), f"{achieved:.0f}"] + [f"{v:.3f}" for v in ms]
                + [str(errors), str(non_2xx), str(origin)]))
EOF
        )
        echo "$line" >>"$OUT.tsv"
        echo "$line" | awk -F'\t' '{printf "| %s | %d | %d | %s | %s | %s | %d | %d | %d |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
        read -r achieved errors non_2xx < <(echo "$line" | awk -F'\t' '{print $3, $7, $8}')
        [ "$errors" -eq 0 ] && [ "$non_2xx" -eq 0 ] && [ "$((achieved * 100))" -ge "$((rate * 95))" ] || break
        rate=$((rate + STEP))
    done
    kill "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
done
python3 benches/plot_latency_ramp.py "$OUT.tsv" "$OUT.svg"
echo "wrote $OUT.tsv and $OUT.svg" >&2
