#!/usr/bin/env bash
# Hit rps of a cache tier on one machine (docs/cluster.md), for docs/BENCHMARKS.md:
#
# - HAProxy (`balance uri`, `hash-type consistent`, one thread) in front of 1, 2 and 3 edgecache
#   nodes (one worker each), `wrk` spreading requests over 300 stored URLs;
# - the self-routing mode (examples/cluster.vcl on 3 nodes, no balancer): `wrk` on node 0 with
#   the URLs node 0 owns (served from its cache) and then with the URLs another node owns (each
#   one forwarded to its owner): the difference is the cost of a forwarded request.
#
# Cores (taskset): HAProxy on $LB_CORE, node i on the i-th of $NODE_CORES, wrk on $LOAD_CORE, the
# Python origin on $ORIGIN_CORE; defaults for 2 cores: 0, "1 1 1", 0, 0. Every row prints them.
# A row whose wrk saw errors or non-2xx answers stops the script with wrk's output and the
# nodes' logs ($RUN/n*.log), rather than printing a rate of failures.
# Run it on a quiet machine only (it is load):
#
#   cargo build --release && benches/cluster_tier.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/edgecache}
LB_CORE=${LB_CORE:-0}
read -r -a NODE_CORES <<<"${NODE_CORES:-1 1 1}"
LOAD_CORE=${LOAD_CORE:-0}
ORIGIN_CORE=${ORIGIN_CORE:-0}
SECONDS_PER_ROW=${SECONDS_PER_ROW:-10}
URLS=300
ORIGIN=19600
LB=19601
NODE_PORTS=(19611 19612 19613)
for tool in haproxy wrk python3 curl taskset; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install haproxy wrk)" >&2; exit 1; }
done
. benches/run_dir.sh cluster-tier

cat >"$RUN/origin.py" <<'EOF'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"x" * 510
        self.send_response(200)
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
EOF
# wrk: each connection walks its own list of URLs (one per line in $URL_LIST).
cat >"$RUN/urls.lua" <<'EOF'
local urls = {}
for line in io.lines(os.getenv("URL_LIST")) do urls[#urls + 1] = line end
local n = 0
request = function()
    n = n % #urls + 1
    return wrk.format("GET", urls[n])
end
EOF
seq 0 $((URLS - 1)) | sed 's|^|/item/|' >"$RUN/all.txt"

taskset -c "$ORIGIN_CORE" python3 "$RUN/origin.py" "$ORIGIN" & PIDS+=($!)
wait_port() {
    for _ in $(seq 100); do curl -s -o /dev/null "http://$1/healthz" && return; sleep 0.05; done
    echo "nothing answers on $1" >&2; exit 1
}
wait_port "127.0.0.1:$ORIGIN"

NODE_PIDS=()
stop_nodes() {
    for pid in "${NODE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    NODE_PIDS=()
}

start_node() {   # index, then edgecache's arguments: node i on its core, its log in $RUN/n$i.log
    local i=$1
    shift
    RUST_LOG=warn taskset -c "${NODE_CORES[$i]}" "$BIN" --threads 1 -T off --no-watch "$@" \
        2>>"$RUN/n$i.log" & PIDS+=($!); NODE_PIDS+=($!)
    wait_port "127.0.0.1:${NODE_PORTS[$i]}"
}

rps() {   # url-list base-url: wrk's requests/s; any failed request stops the script
    URL_LIST=$1 taskset -c "$LOAD_CORE" wrk -t1 -c64 -d"${SECONDS_PER_ROW}s" -s "$RUN/urls.lua" "$2" \
        >"$RUN/wrk.out"
    if grep -q "Non-2xx\|Socket errors" "$RUN/wrk.out"; then
        { cat "$RUN/wrk.out"; tail -n 20 "$RUN"/n*.log; } >&2
        exit 1
    fi
    awk '/Requests\/sec/ {print $2}' "$RUN/wrk.out"
}

warm() {   # url-list base-url: every URL requested once, so the rows measure hits
    while read -r url; do curl -s -o /dev/null "$2$url"; done <"$1"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| tier | cores (balancer; nodes; wrk; origin) | hit requests/s |"
echo "|---|---|---:|"
for count in 1 2 3; do
    servers=""
    for ((i = 0; i < count; i++)); do
        servers+="    server n$i 127.0.0.1:${NODE_PORTS[$i]} check inter 1s"$'\n'
    done
    cat >"$RUN/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:$LB
    default_backend tier
backend tier
    balance uri
    hash-type consistent
    http-reuse always
    option httpchk GET /healthz
$servers
EOF
    for ((i = 0; i < count; i++)); do
        start_node "$i" -a "127.0.0.1:${NODE_PORTS[$i]}" -b "127.0.0.1:$ORIGIN"
    done
    taskset -c "$LB_CORE" haproxy -db -f "$RUN/haproxy.cfg" & PIDS+=($!)
    haproxy_pid=$!
    wait_port "127.0.0.1:$LB"
    warm "$RUN/all.txt" "http://127.0.0.1:$LB"
    # An assignment of its own, so that a failed row stops the script (set -e).
    rate=$(rps "$RUN/all.txt" "http://127.0.0.1:$LB")
    echo "| HAProxy + $count node(s) | $LB_CORE; ${NODE_CORES[*]:0:$count}; $LOAD_CORE; $ORIGIN_CORE | $rate |"
    kill "$haproxy_pid"; wait "$haproxy_pid" 2>/dev/null || true
    stop_nodes
done

# Self-routing: a node's backend for itself must not be one of its own listen addresses, as
# edgecache refuses such a backend (it would loop); so the nodes listen on every interface and
# the policy names them by this machine's first non-loopback address, as a real tier would.
HOST_IP=$(hostname -I | awk '{print $1}')
[ -n "$HOST_IP" ] || { echo "no non-loopback address for the self-routing rows" >&2; exit 1; }
policy=$(cat examples/cluster.vcl)
policy=${policy//'.host = "10.0.0.20"; .port = "8080";'/".host = \"127.0.0.1\"; .port = \"$ORIGIN\";"}
for i in 0 1 2; do
    policy=${policy//".host = \"10.0.0.1$((i + 1))\"; .port = \"6081\";"/".host = \"$HOST_IP\"; .port = \"${NODE_PORTS[$i]}\";"}
done
echo "$policy" >"$RUN/cluster.vcl"
for i in 0 1 2; do
    EDGECACHE_NODE="n$i" start_node "$i" -a ":${NODE_PORTS[$i]}" -f "$RUN/cluster.vcl"
    wait_port "$HOST_IP:${NODE_PORTS[$i]}"   # where the other nodes' policy sends its URLs
done
warm "$RUN/all.txt" "http://127.0.0.1:${NODE_PORTS[0]}"
: >"$RUN/owned.txt"; : >"$RUN/forwarded.txt"
while read -r url; do   # owned by node 0: stored there, as a hop asking only its cache shows
    status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Cache-Control: only-if-cached' \
        -H 'X-Cluster-Hop: bench' "http://127.0.0.1:${NODE_PORTS[0]}$url")
    if [ "$status" = 200 ]; then echo "$url" >>"$RUN/owned.txt"; else echo "$url" >>"$RUN/forwarded.txt"; fi
done <"$RUN/all.txt"
rate=$(rps "$RUN/owned.txt" "http://127.0.0.1:${NODE_PORTS[0]}")
echo "| self-routing, node 0, its own URLs ($(wc -l <"$RUN/owned.txt")) | -; ${NODE_CORES[*]}; $LOAD_CORE; $ORIGIN_CORE | $rate |"
rate=$(rps "$RUN/forwarded.txt" "http://127.0.0.1:${NODE_PORTS[0]}")
echo "| self-routing, node 0, URLs it forwards ($(wc -l <"$RUN/forwarded.txt")) | -; ${NODE_CORES[*]}; $LOAD_CORE; $ORIGIN_CORE | $rate |"
stop_nodes   # before the origin goes, so no node logs a failed fetch on the way out
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
