#!/usr/bin/env bash
# TLS side by side: edgecache and HAProxy's cache, one worker each, in front of the same nginx
# origin, on the same 510-byte object: `h2load` over https:// (ALPN h2) and `wrk` over TLS
# (HTTP/1.1). Issue "The front door" asks for this row, which ../shared/bench/peers.sh (plain
# HTTP only) does not have.
#
#   benches/tls_vs_haproxy.sh                # needs: cargo build --release, and the Debian
#                                            # packages nginx haproxy wrk nghttp2-client openssl
#   SECONDS_PER_ROW=10 benches/tls_vs_haproxy.sh
#
# Servers run on CPU 0, the load tools and the origin on CPU 1. Everything lives in a temporary
# directory and on 127.0.0.1 ports 19300-19302; every process is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_ROW=${SECONDS_PER_ROW:-10}
BIN=${BIN:-target/release/edgecache}
for tool in nginx haproxy wrk h2load openssl taskset curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx haproxy wrk nghttp2-client openssl)" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }

. benches/run_dir.sh tls-bench

ORIGIN=19300 EDGE=19301 HAPROXY=19302
mkdir -p "$RUN/www" "$RUN/nginx"
# nginx's workers run as nobody: mktemp's 0700 made every request a 403, which neither cache
# stores (session 4's first run measured those passes, not hits).
chmod 755 "$RUN" "$RUN/www"
head -c 510 /dev/urandom >"$RUN/www/small.gif"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
cat "$RUN/cert.pem" "$RUN/key.pem" >"$RUN/haproxy.pem"

cat >"$RUN/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
error_log $RUN/nginx/error.log;
pid $RUN/nginx/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $RUN/nginx; proxy_temp_path $RUN/nginx;
    fastcgi_temp_path $RUN/nginx; uwsgi_temp_path $RUN/nginx; scgi_temp_path $RUN/nginx;
    server {
        listen 127.0.0.1:$ORIGIN;
        root $RUN/www;
        add_header Cache-Control "max-age=3600";
    }
}
EOF
cat >"$RUN/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
    tune.ssl.default-dh-param 2048
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    option http-keep-alive
cache bench
    total-max-size 256
    max-age 3600
frontend fe
    bind 127.0.0.1:$HAPROXY ssl crt $RUN/haproxy.pem alpn h2,http/1.1
    http-request cache-use bench
    http-response cache-store bench
    default_backend origin
backend origin
    http-reuse always
    server o1 127.0.0.1:$ORIGIN
EOF

taskset -c 1 nginx -c "$RUN/nginx/nginx.conf" -p "$RUN/nginx/" & PIDS+=($!)
taskset -c 0 haproxy -f "$RUN/haproxy.cfg" -db & PIDS+=($!)
RUST_LOG=warn taskset -c 0 "$BIN" -a "127.0.0.1:$EDGE,tls" --tls-cert "$RUN/cert.pem" \
    --tls-key "$RUN/key.pem" -b "127.0.0.1:$ORIGIN" --threads 1 -T off --no-watch & PIDS+=($!)
EDGE_PID=$!
HAPROXY_PID=${PIDS[1]}
for port in $ORIGIN $EDGE $HAPROXY; do
    for _ in $(seq 50); do curl -sk -o /dev/null "https://localhost:$port/small.gif" 2>/dev/null \
        || curl -s -o /dev/null "http://127.0.0.1:$port/small.gif" 2>/dev/null && break; sleep 0.1; done
done

cpu_ticks() {   # utime + stime of a process and its threads, in clock ticks
    awk '{print $14 + $15}' "/proc/$1/stat"
}

row() {   # name pid url tool
    local name=$1 pid=$2 url=$3 tool=$4 before after requests rps
    curl -sk -o /dev/null "$url"   # stored before the load
    local status
    status=$(curl -sk -o /dev/null -w '%{http_code}' "$url")
    [ "$status" = 200 ] || { echo "$name answers $status for $url, not 200: not measured" >&2; exit 1; }
    before=$(cpu_ticks "$pid")
    if [ "$tool" = h2 ]; then
        out=$(taskset -c 1 h2load -c100 -m10 -D "$SECONDS_PER_ROW" "$url" 2>&1)
        rps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' <<<"$out")
        requests=$(awk -v rps="$rps" -v s="$SECONDS_PER_ROW" 'BEGIN {printf "%d", rps * s}')
    else
        out=$(taskset -c 1 wrk -t1 -c100 -d"${SECONDS_PER_ROW}s" "$url" 2>&1)
        requests=$(awk '/requests in/ {print $1}' <<<"$out")
        rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    fi
    after=$(cpu_ticks "$pid")
    local ticks=$((after - before)) hz
    hz=$(getconf CLK_TCK)
    printf '| %s | %s | %s | %.1f |\n' "$name" "$tool" "$rps" \
        "$(awk -v t="$ticks" -v hz="$hz" -v n="$requests" 'BEGIN {print (n > 0) ? t / hz / n * 1e6 : 0}')"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| server | protocol | requests/s | CPU µs/req |"
echo "|---|---|---:|---:|"
row edgecache "$EDGE_PID" "https://localhost:$EDGE/small.gif" h2
row haproxy "$HAPROXY_PID" "https://localhost:$HAPROXY/small.gif" h2
row edgecache "$EDGE_PID" "https://localhost:$EDGE/small.gif" h1
row haproxy "$HAPROXY_PID" "https://localhost:$HAPROXY/small.gif" h1
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
