#!/usr/bin/env bash
# Instructions per request on the hit and the pass path, counted by callgrind (repeatable on a
# noisy machine, unlike seconds). The Python origin `benches/bench_origin.py` on 127.0.0.1:19500
# serves `/small` (510 B, max-age=3600) and `/dyn` (no-store); edgecache runs under callgrind on
# 19501 with one worker; the counters are zeroed after a warm-up, a load tool runs for a fixed
# time, and the dump's total is divided by the requests it completed. Rows: HTTP/1.1 hit and
# pass (`wrk -t1 -c4`), h2c hit and pass (`h2load -c4 -m10`), and the hit over TLS on a `,tls`
# listener (19502) for HTTP/1.1 and h2 (ALPN). A row's count includes the connection's share of
# TLS record work but no handshakes (the tools keep their connections for the whole row).
#
# PORT_BASE=P moves the four ports (origin P, plain P+1, TLS P+2, admin P+3); unset, the first
# base from 19500 up (in steps of 20) whose ports are free is taken, so two runs can share the
# machine. A policy given with `-f` must point its backend at the origin port the script prints.
#
# ROWS="hit pass h2c h2pass tls h2tls" (the default) picks the rows to run; KEEP=DIR keeps each row's
# callgrind dump there, for `callgrind_annotate --inclusive=yes DIR/ROW.callgrind`.
#
# With BANS=N, a last row repeats the HTTP/1.1 hit after N bans on `req.url` (which lookups
# test and the lurker leaves alone) were added through the admin API (127.0.0.1:19503), all
# newer than the stored `/small`: what a long ban list costs a hit.
#
#   cargo build --release && [BANS=10000] benches/callgrind_paths.sh [BINARY] [-- EXTRA EDGECACHE FLAGS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/edgecache}
shift || true
[ "${1:-}" = "--" ] && shift
BANS=${BANS:-0}
ROWS=${ROWS:-hit pass h2c h2pass tls h2tls}
for tool in valgrind callgrind_control wrk h2load openssl python3 curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install valgrind wrk nghttp2-client openssl)" >&2; exit 1; }
done
. benches/run_dir.sh callgrind
if [ -z "${PORT_BASE:-}" ]; then
    PORT_BASE=19500
    until port_free "$PORT_BASE" && port_free $((PORT_BASE + 1)) && port_free $((PORT_BASE + 2)) \
        && port_free $((PORT_BASE + 3)); do PORT_BASE=$((PORT_BASE + 20)); done
fi
ORIGIN_PORT=$PORT_BASE PLAIN_PORT=$((PORT_BASE + 1)) TLS_PORT=$((PORT_BASE + 2)) ADMIN_PORT=$((PORT_BASE + 3))
echo "origin on 127.0.0.1:$ORIGIN_PORT, edgecache on :$PLAIN_PORT (TLS :$TLS_PORT)" >&2
ADMIN=(-T off)
[ "$BANS" -gt 0 ] && ADMIN=(-T "127.0.0.1:$ADMIN_PORT")

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
python3 benches/bench_origin.py "$ORIGIN_PORT" & PIDS+=($!)
RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$RUN/cg.%p" \
    "$BIN" -a 127.0.0.1:$PLAIN_PORT -a 127.0.0.1:$TLS_PORT,tls --tls-cert "$RUN/cert.pem" \
    --tls-key "$RUN/key.pem" -b 127.0.0.1:$ORIGIN_PORT --threads 1 --no-watch "${ADMIN[@]}" "$@" \
    2>"$RUN/valgrind.log" & PIDS+=($!)
EDGE=$!
wait_for http://127.0.0.1:$PLAIN_PORT/small

load() {   # tool url seconds: prints the requests completed
    if [ "$1" = h2 ]; then
        h2load -c4 -m10 -D "$3" "$2" 2>&1 | awk '/^requests:/ {print $8}'
    else
        wrk -t1 -c4 -d"$3"s "$2" | awk '/requests in/ {print $1}'
    fi
}

measure() {   # name tool url seconds
    load "$2" "$3" 2 >/dev/null   # warm-up: stored, pools filled
    callgrind_control -z "$EDGE" >/dev/null
    local requests
    requests=$(load "$2" "$3" "$4")
    rm -f "$RUN"/cg.*
    callgrind_control -d load "$EDGE" >/dev/null
    local total=""
    for _ in $(seq 100); do   # the dump is written by the process itself, shortly after
        # ... once it runs again: an idle single-threaded process never reads the command.
        curl -s -o /dev/null http://127.0.0.1:$PLAIN_PORT/small || true
        total=$( (cat "$RUN"/cg.* 2>/dev/null || true) | awk '/^(summary|totals):/ {s = $2} END {print s}')
        [ -n "$total" ] && break
        sleep 0.1
    done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cat "$RUN"/cg.* >"$KEEP/${1//[^A-Za-z0-9]/_}.callgrind"; fi
    printf '| %s | %s | %s | %.1fk |\n' "$1" "$requests" "$total" "$(awk -v t="$total" -v n="$requests" 'BEGIN {print t / n / 1000}')"
}
echo "| path | requests | instructions | per request |"
echo "|---|---:|---:|---:|"
row() { [[ " $ROWS " == *" $1 "* ]]; }
row hit && measure "/small HTTP/1.1 hit" h1 http://127.0.0.1:$PLAIN_PORT/small 10
row pass && measure "/dyn HTTP/1.1 pass" h1 http://127.0.0.1:$PLAIN_PORT/dyn 10
row h2c && measure "/small h2c hit" h2 http://127.0.0.1:$PLAIN_PORT/small 10
row h2pass && measure "/dyn h2c pass" h2 http://127.0.0.1:$PLAIN_PORT/dyn 10
row tls && measure "/small HTTP/1.1 TLS hit" h1 https://localhost:$TLS_PORT/small 10
row h2tls && measure "/small h2 TLS hit" h2 https://localhost:$TLS_PORT/small 10
if [ "$BANS" -gt 0 ]; then
    python3 - "$BANS" "$ADMIN_PORT" <<'EOF'
import http.client, json, sys
admin = http.client.HTTPConnection("127.0.0.1", int(sys.argv[2]))
for n in range(int(sys.argv[1])):
    ban = json.dumps(f'req.url == "/other/{n}"')
    admin.request("POST", "/ban", body=ban, headers={"Content-Type": "application/json"})
    answer = admin.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
EOF
    measure "/small HTTP/1.1 hit, $BANS bans" h1 http://127.0.0.1:$PLAIN_PORT/small 10
    curl -s http://127.0.0.1:$ADMIN_PORT/stats | python3 -c \
        'import json, sys; s = json.load(sys.stdin); print("bans", s["bans"], "- bans tested", s["bans_tested"])'
fi
