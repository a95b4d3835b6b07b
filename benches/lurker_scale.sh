#!/usr/bin/env bash
# The ban lurker at the size issue 12 names: OBJECTS stored objects (default 100,000, each
# answering `X-Id: N` from an nginx origin), then BANS bans `obj.http.x-id == "N"` (default
# 10,000; the first MATCHED of them, default 10,000, match one object each, the rest nothing)
# sent to the admin API. No request arrives after that; the script polls `GET /bans` until
# the list is empty and prints how long the lurker took, how many objects it removed and how
# many stayed. tests/ban_lurker.rs asserts the same behaviour at 2,100 objects in seconds.
#
#   cargo build --release && [OBJECTS=100000 BANS=10000] benches/lurker_scale.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/edgecache}
OBJECTS=${OBJECTS:-100000}
BANS=${BANS:-10000}
for tool in nginx h2load python3 curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx nghttp2-client)" >&2; exit 1; }
done
. benches/run_dir.sh lurker
chmod 755 "$RUN"
cat >"$RUN/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $RUN/nginx.pid; error_log $RUN/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:19510;
        location ~ ^/obj/(?<id>[0-9]+)\$ {
            add_header X-Id \$id;
            add_header Cache-Control "max-age=3600";
            return 200 "object \$id\n";
        }
    }
}
EOF
nginx -c "$RUN/nginx.conf" & PIDS+=($!)
RUST_LOG=warn "$BIN" -a 127.0.0.1:19511 -b 127.0.0.1:19510 -T 127.0.0.1:19512 -s 1G \
    --ban-lurker-age 2s --no-watch --threads 1 --h2-max-streams-per-second 0 2>"$RUN/edgecache.log" & PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:19511/obj/0 && break; sleep 0.2; done
# One client: h2load gives each client the URI list from its start.
seq 0 $((OBJECTS - 1)) | sed 's|^|http://127.0.0.1:19511/obj/|' >"$RUN/uris"
h2load -n "$OBJECTS" -c 1 -m 100 -i "$RUN/uris" http://127.0.0.1:19511 | grep -E "^requests:"
python3 - "$BANS" "$OBJECTS" <<'EOF'
import http.client, json, sys, time
bans, objects = int(sys.argv[1]), int(sys.argv[2])
def call(conn, method, path, body=None):
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()
conn = http.client.HTTPConnection("127.0.0.1", 19512)
stats = json.loads(call(conn, "GET", "/stats")[1])
print(f"stored objects: {stats['cache']['objects']}")
started = time.monotonic()
for n in range(bans):
    status, body = call(conn, "POST", "/ban", json.dumps(f'obj.http.x-id == "{n}"'))
    assert status == 200, body
added = time.monotonic()
print(f"{bans} bans added in {added - started:.1f} s")
while True:
    listed = json.loads(call(conn, "GET", "/bans")[1])
    if not listed["bans"]:
        break
    time.sleep(0.2)
done = time.monotonic()
stats = json.loads(call(conn, "GET", "/stats")[1])
print(f"ban list empty {done - added:.1f} s after the last ban (lurker age 2 s included)")
print(f"lurked {stats['bans_lurked']} bans, removed {stats['bans_lurker_removed']} objects, "
      f"{stats['cache']['objects']} stored, {stats['requests']} requests in all, "
      f"{stats['bans_tested']} bans tested at lookup")
EOF
