#!/usr/bin/env bash
# How the cost of a cache hit grows (issue 11): instructions per hit, counted by callgrind
# (repeatable on a busy machine), with 1k against 1M objects stored, 100 `Vary` variants of
# one URL, 10,000 bans on the list, 10 against 10,000 keep-alive client connections, and a
# policy of 10 against 500 rules. One table.
#
# An nginx origin (127.0.0.1:19530) answers `/obj/N` (`X-Id: N`, max-age=3600) and `/vary`
# (`Vary: X-V`). Each edgecache runs under callgrind with one worker and instrumentation off
# (`--instr-atstart=no`), so stores are filled at near native speed (h2load, 100 streams);
# `callgrind_control -i on` then turns counting on. A row is callgrind_paths.sh's method: a
# 2 s warm-up, the counters zeroed, wrk (`-t1 -c4` unless the row says otherwise) for ROW_SECONDS
# (default 10), the dump's total divided by the requests wrk completed; the row fails if the
# origin saw a request meanwhile (a miss is not a hit's cost). Rows over many objects ask for
# a uniformly random stored one (a wrk Lua script: its cost is wrk's, not counted). The
# 10,000-connection row holds that many keep-alive connections open and idle (one request
# each, from a Python script) while wrk loads 10 more. The ban rows are callgrind_paths.sh's
# (BANS=10000, its own Python origin), run last.
#
#   cargo build --release && [OBJECTS=1000000 ROW_SECONDS=10] benches/cost_growth.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/edgecache}")
OBJECTS=${OBJECTS:-1000000}
ROW_SECONDS=${ROW_SECONDS:-10}
for tool in valgrind callgrind_control wrk h2load nginx python3 curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install valgrind wrk nghttp2-client nginx)" >&2; exit 1; }
done
[ "$(ulimit -n)" -ge 10100 ] || ulimit -n 20000 || { echo "the 10,000-connection row needs ulimit -n >= 10100" >&2; exit 1; }
. benches/run_dir.sh growth
chmod 755 "$RUN"
cat >"$RUN/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $RUN/nginx.pid; error_log $RUN/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:19530;
        location ~ ^/obj/(?<id>[0-9]+)\$ {
            add_header X-Id \$id;
            add_header Cache-Control "max-age=3600";
            return 200 "object \$id\n";
        }
        location = /origin_status { stub_status; }
        location = /vary {
            add_header Vary X-V;
            add_header Cache-Control "max-age=3600";
            return 200 "variant \$http_x_v\n";
        }
    }
}
EOF
nginx -c "$RUN/nginx.conf" & PIDS+=($!)

# Hits on a uniformly random one of objects 0..N-1 (`-- N`), or on a random variant
# `X-V: FIRST..LAST` of `/vary` (`-- vary FIRST LAST`).
cat >"$RUN/random.lua" <<'EOF'
function init(args)
    mode, first, last = args[1], tonumber(args[2]), tonumber(args[3])
    if mode ~= "vary" then first, last = 0, tonumber(args[1]) - 1 end
end
function request()
    local n = math.random(first, last)
    if mode == "vary" then return wrk.format("GET", "/vary", {["X-V"] = tostring(n)}) end
    return wrk.format("GET", "/obj/" .. n)
end
EOF

# A policy of N rules: each tests the URL against its own section prefix (none matches
# `/obj/`), so a hit runs all N.
policy() {
    echo "vcl 4.1;"
    echo "sub vcl_recv {"
    for n in $(seq "$1"); do
        echo "    if (req.url ~ \"^/section-$n/\") { set req.http.X-Section = \"$n\"; }"
    done
    echo "}"
}
policy 10 >"$RUN/rules10.vcl"
policy 500 >"$RUN/rules500.vcl"

declare -A EDGE_PID EDGE_PORT
start() {   # name port [edgecache flags...]
    local name=$1 port=$2
    shift 2
    RUST_LOG=warn valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$RUN/cg-$name.%p" \
        "$BIN" -a "127.0.0.1:$port" -b 127.0.0.1:19530 --threads 1 --no-watch -T off -s 4G \
        --max-connections 20000 --idle-timeout 600s "$@" 2>"$RUN/valgrind-$name.log" &
    PIDS+=($!)
    EDGE_PID[$name]=$!
    EDGE_PORT[$name]=$port
    for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/obj/0" && return; sleep 0.2; done
    echo "edgecache $name did not start:" >&2
    cat "$RUN/valgrind-$name.log" >&2
    exit 1
}

control() {   # name callgrind_control-flags...: a process idle in epoll reads the command only
    # once it runs again, so requests keep it busy until callgrind_control returns.
    local name=$1
    shift
    callgrind_control "$@" "${EDGE_PID[$name]}" >/dev/null 2>&1 &
    local waiting=$!
    while kill -0 "$waiting" 2>/dev/null; do
        curl -s -o /dev/null "http://127.0.0.1:${EDGE_PORT[$name]}/obj/0" || true
        sleep 0.1
    done
    wait "$waiting"
}

fill() {   # name first last: stores /obj/first../obj/last
    echo "$(date -u +%T) $1: storing objects $2-$3" >&2
    seq "$2" "$3" | sed "s|^|http://127.0.0.1:${EDGE_PORT[$1]}/obj/|" >"$RUN/uris"
    # One client: h2load gives each client the URI list from its start.
    h2load -n $(($3 - $2 + 1)) -c 1 -m 100 -i "$RUN/uris" "http://127.0.0.1:${EDGE_PORT[$1]}" \
        | grep -q "succeeded, 0 failed" || { echo "fill of $1 failed" >&2; exit 1; }
}

load() {   # connections seconds url [lua args...]: prints the requests completed
    local connections=$1 seconds=$2 url=$3
    shift 3
    local script=("$url")
    [ $# -gt 0 ] && script=(-s "$RUN/random.lua" "$url" -- "$@")
    wrk -t1 -c"$connections" -d"$seconds"s "${script[@]}" >"$RUN/wrk.out"
    # Every answer must have been a 2xx: an error is not a hit's cost.
    if grep -q "Non-2xx\|Socket errors" "$RUN/wrk.out"; then cat "$RUN/wrk.out" >&2; exit 1; fi
    awk '/requests in/ {print $1}' "$RUN/wrk.out"
}

origin_requests() {
    curl -s http://127.0.0.1:19530/origin_status | awk 'NR == 3 {print $3}'
}

row() {   # label name connections path [lua args...]
    local label=$1 name=$2 connections=$3 url="http://127.0.0.1:${EDGE_PORT[$2]}$4"
    shift 4
    load "$connections" 2 "$url" "$@" >/dev/null
    control "$name" -z
    local requests before
    before=$(origin_requests)
    requests=$(load "$connections" "$ROW_SECONDS" "$url" "$@")
    # A miss is not a hit's cost: the origin saw nothing but the status request itself.
    [ $(($(origin_requests) - before - 1)) -eq 0 ] || { echo "$label: misses during the row" >&2; exit 1; }
    rm -f "$RUN/cg-$name".*
    control "$name" -d
    local total=""
    for _ in $(seq 100); do
        total=$( (cat "$RUN/cg-$name".* 2>/dev/null || true) | awk '/^(summary|totals):/ {s = $2} END {print s}')
        [ -n "$total" ] && break
        sleep 0.1
    done
    printf '| %s | %s | %s | %.1fk |\n' "$label" "$requests" "$total" \
        "$(awk -v t="$total" -v n="$requests" 'BEGIN {print t / n / 1000}')"
}

# Opens COUNT keep-alive connections to edgecache NAME, one request each, and keeps them open
# and idle until it is killed.
cat >"$RUN/hold.py" <<'EOF'
import socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(count):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"GET /obj/0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    held.append(conn)
for conn in held:
    assert conn.recv(65536).startswith(b"HTTP/1.1 200"), "no answer"
print(f"{count} connections open", file=sys.stderr)
time.sleep(3600)
EOF
hold() {   # name count: sets HOLDER, the holding process
    python3 "$RUN/hold.py" "${EDGE_PORT[$1]}" "$2" & PIDS+=($!)
    HOLDER=$!
    for _ in $(seq 1200); do
        [ "$(ss -Htn state established "( sport = :${EDGE_PORT[$1]} )" | wc -l)" -ge "$2" ] && return
        sleep 0.2
    done
    echo "$1: $2 connections did not open" >&2
    exit 1
}

start store 19531
fill store 0 999
control store -i on
echo "| row | requests | instructions | per request |"
echo "|---|---:|---:|---:|"
row "hit, one object (/obj/0), 1k stored" store 4 /obj/0
row "hit, 1k objects stored (random one of them)" store 4 / 1000
row "hit, 10 keep-alive connections (one object)" store 10 /obj/0
hold store 10000
row "hit, the same 10 busy with 10,000 more open and idle (one object)" store 10 /obj/0
kill "$HOLDER"
control store -i off
fill store 1000 $((OBJECTS - 1))
control store -i on
row "hit, $((OBJECTS / 1000))k objects stored (random one of them)" store 4 / "$OBJECTS"
# 100 variants of /vary were fetched; requests ask for the ones still stored.
python3 - "${EDGE_PORT[store]}" <<'EOF'
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for n in range(100):
    conn.request("GET", "/vary", headers={"X-V": str(n)})
    response = conn.getresponse()
    assert response.read() == f"variant {n}\n".encode(), n
EOF
row "hit, /vary after 100 variants were fetched (the 32 kept, random)" store 4 /vary vary 68 99

start rules10 19532 -f "$RUN/rules10.vcl"
control rules10 -i on
row "hit, policy of 10 rules (one object)" rules10 4 /obj/0
start rules500 19533 -f "$RUN/rules500.vcl"
control rules500 -i on
row "hit, policy of 500 rules (one object)" rules500 4 /obj/0

BANS=10000 benches/callgrind_paths.sh "$BIN" 2>/dev/null | grep "HTTP/1.1 hit" | grep -v TLS \
    | sed 's/^| \/small HTTP\/1.1 hit, \([0-9]*\) bans/| hit, \1 bans on the list (callgrind_paths.sh)/;
           s/^| \/small HTTP\/1.1 hit |/| hit, no bans (callgrind_paths.sh) |/'
