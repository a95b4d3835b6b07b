#!/usr/bin/env bash
# Bytes of RSS per cached object (issue 11): OBJECTS small objects (default 1,000,000 distinct
# URLs `/obj/N`, 100-byte bodies, max-age=3600, from an nginx origin on 127.0.0.1:19540)
# stored in edgecache (127.0.0.1:19541, one worker, -s 8G so nothing is evicted) and in
# Varnish (`varnishd -s malloc,8G`, its own instance on 127.0.0.1:19543 with its workdir in
# the run directory), one after the other. Each is filled by h2load (one client, 100 streams,
# the URI list from a file); the figure is (RSS after the fill - RSS after one request) /
# objects stored, RSS summed over the server's processes (Varnish: manager and child). The
# stored counts are read back (edgecache's admin API, `varnishstat`) and must equal OBJECTS.
#
# BODY_BYTES=N serves every object from one file of N bytes instead (nginx then adds its
# `Last-Modified`, `ETag` and `Accept-Ranges`), for large objects: e.g. OBJECTS=1000
# BODY_BYTES=204800. THREADS=N runs edgecache with `--threads N` (default 1): which worker
# copies a body into the store decides which allocator arena holds it. STREAMS=N fills with N
# streams in flight (default 100; 1 fills one object at a time).
#
#   cargo build --release && [OBJECTS=1000000] [BODY_BYTES=N] [THREADS=N] [STREAMS=N] benches/memory_per_object.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/edgecache}")
OBJECTS=${OBJECTS:-1000000}
BODY_BYTES=${BODY_BYTES:-}
THREADS=${THREADS:-1}
STREAMS=${STREAMS:-100}
for tool in nginx h2load varnishd varnishstat python3 curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx nghttp2-client varnish)" >&2; exit 1; }
done
. benches/run_dir.sh memory
chmod 755 "$RUN"
BODY=$(printf 'x%.0s' $(seq 99))
if [ -n "$BODY_BYTES" ]; then
    head -c "$BODY_BYTES" /dev/zero | tr '\0' x >"$RUN/body"
    chmod 644 "$RUN/body"
    ANSWER="root $RUN; try_files /body =404;"
else
    ANSWER="return 200 \"$BODY\\n\";"
fi
cat >"$RUN/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $RUN/nginx.pid; error_log $RUN/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.1:19540;
        location /obj/ {
            default_type text/plain;
            add_header Cache-Control "max-age=3600";
            $ANSWER
        }
    }
}
EOF
nginx -c "$RUN/nginx.conf" & PIDS+=($!)
seq 0 $((OBJECTS - 1)) | sed 's|^|/obj/|' >"$RUN/paths"

rss_kib() {   # pids...: resident KiB, summed
    local total=0
    for pid in "$@"; do total=$((total + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"))); done
    echo "$total"
}

fill() {   # port: requests every path once
    sed "s|^|http://127.0.0.1:$1|" "$RUN/paths" >"$RUN/uris"
    # One client: h2load gives each client the URI list from its start.
    h2load -n "$OBJECTS" -c 1 -m "$STREAMS" -i "$RUN/uris" "http://127.0.0.1:$1" >"$RUN/h2load.out"
    grep -q "$OBJECTS succeeded, 0 failed" "$RUN/h2load.out" || { cat "$RUN/h2load.out" >&2; exit 1; }
}

wait_for() {   # url
    for _ in $(seq 100); do curl -s -o /dev/null "$1" && return; sleep 0.2; done
    echo "nothing answers $1" >&2
    exit 1
}

report() {   # name before_kib after_kib stored
    [ "$4" -eq "$OBJECTS" ] || { echo "$1 stored $4 objects of $OBJECTS" >&2; exit 1; }
    printf '| %s | %s | %.1f MiB | %.1f MiB | %.0f B |\n' "$1" "$4" "$(echo "$2 / 1024" | bc -l)" \
        "$(echo "$3 / 1024" | bc -l)" "$(echo "($3 - $2) * 1024 / $4" | bc -l)"
}

echo "| server | objects stored | RSS after one request | RSS after the fill | RSS per object |"
echo "|---|---:|---:|---:|---:|"

RUST_LOG=warn "$BIN" -a 127.0.0.1:19541 -b 127.0.0.1:19540 -T 127.0.0.1:19542 -s 8G \
    --threads "$THREADS" --no-watch --h2-max-streams-per-second 0 2>"$RUN/edgecache.log" & PIDS+=($!)
EDGE=$!
wait_for http://127.0.0.1:19541/obj/0
before=$(rss_kib "$EDGE")
fill 19541
after=$(rss_kib "$EDGE")
stored=$(curl -s http://127.0.0.1:19542/stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["cache"]["objects"])')
report "edgecache $("$BIN" --version | awk '{print $2}') --threads $THREADS" "$before" "$after" "$stored"
kill "$EDGE"
wait "$EDGE" 2>/dev/null || true

mkdir "$RUN/varnish"
chmod 777 "$RUN/varnish"
cat >"$RUN/varnish.vcl" <<'EOF'
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "19540"; }
EOF
varnishd -F -n "$RUN/varnish" -a 127.0.0.1:19543 -f "$RUN/varnish.vcl" -s malloc,8G \
    -p feature=+http2 >"$RUN/varnish.log" 2>&1 & PIDS+=($!)
VARNISH=$!
wait_for http://127.0.0.1:19543/obj/0
varnish_pids() { echo "$VARNISH" $(pgrep -P "$VARNISH"); }
# shellcheck disable=SC2046 # one pid per word
before=$(rss_kib $(varnish_pids))
fill 19543
# shellcheck disable=SC2046
after=$(rss_kib $(varnish_pids))
stored=$(varnishstat -n "$RUN/varnish" -1 -f MAIN.n_object | awk '{print $2}')
report "Varnish $(varnishd -V 2>&1 | grep -o 'varnish-[0-9.]*' | head -1 | cut -d- -f2) -s malloc" \
    "$before" "$after" "$stored"
