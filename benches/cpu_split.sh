#!/usr/bin/env bash
# Where a request's CPU time goes, edgecache beside HAProxy: user and system time per request
# (from /proc/PID/stat), and how often the load generator and the origin went to sleep per
# request (their voluntary context switches). A proxy's system time includes waking them: on
# loopback the receiving side's work runs in the sender's system call, and a peer that sleeps
# costs its waker a wake-up (an inter-processor interrupt, dear on a virtual machine).
#
# The setup is peers.sh's (`../shared/bench/`): its nginx origin and HAProxy configuration, the
# proxy pinned to CPU 0, the load tool and the origin to CPU 1, `wrk -t1 -c100` for HTTP/1.1 and
# `h2load -c10 -m10` for h2c. Rows: the 510-byte hit (`/small.gif`) and the pass (`/dyn`) on
# both, ROUNDS times each, alternating between the proxies.
#
#   cargo build --release && benches/cpu_split.sh [BINARY]
#   (ROUNDS=2 ROW_SECONDS=6 ROWS="h1 /small.gif,h1 /dyn,h2c /small.gif,h2c /dyn" are the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/edgecache}")
PEERS=${PEERS_DIR:-../shared/bench}
ROUNDS=${ROUNDS:-2}
SECONDS_PER_ROW=${ROW_SECONDS:-6}
IFS=, read -r -a ROWS <<<"${ROWS:-h1 /small.gif,h1 /dyn,h2c /small.gif,h2c /dyn}"
for tool in nginx haproxy wrk h2load taskset curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install nginx haproxy wrk nghttp2-client)" >&2; exit 1; }
done
[ -f "$PEERS/conf/haproxy.cfg" ] || { echo "peers.sh's configuration not found in $PEERS (set PEERS_DIR)" >&2; exit 1; }
. benches/run_dir.sh cpu-split
ORIGIN_PORT=19200 HAPROXY_PORT=19210 EDGE_PORT=19220
for port in $ORIGIN_PORT $((ORIGIN_PORT + 1)) $HAPROXY_PORT $((HAPROXY_PORT + 1)) $EDGE_PORT; do
    port_free $port || { echo "port $port is in use (another bench running?)" >&2; exit 1; }
done
chmod 755 "$RUN"   # nginx's workers run as another user
mkdir -p "$RUN/origin/www" "$RUN/origin/tmp" "$RUN/haproxy"
head -c 510 /dev/urandom >"$RUN/origin/www/small.gif"
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN_PORT#" -e "s#@ORIGIN_H2C_PORT@#$((ORIGIN_PORT + 1))#" \
    "$PEERS/conf/origin.nginx.conf" >"$RUN/origin/nginx.conf"
sed -e "s#@RUN@#$RUN#g" -e "s#@ORIGIN_PORT@#$ORIGIN_PORT#" -e "s#@PORT@#$HAPROXY_PORT#" \
    -e "s#@H2C_PORT@#$((HAPROXY_PORT + 1))#" "$PEERS/conf/haproxy.cfg" >"$RUN/haproxy/haproxy.cfg"

taskset -c 1 nginx -c "$RUN/origin/nginx.conf" -p "$RUN/origin/" & PIDS+=($!)
taskset -c 0 haproxy -f "$RUN/haproxy/haproxy.cfg" -db >/dev/null 2>&1 & PIDS+=($!)
HAPROXY=$!
RUST_LOG=warn taskset -c 0 "$BIN" -a 127.0.0.1:$EDGE_PORT -b 127.0.0.1:$ORIGIN_PORT --threads 1 \
    -T off --no-watch & PIDS+=($!)
EDGE=$!
for port in $ORIGIN_PORT $HAPROXY_PORT $EDGE_PORT; do wait_for http://127.0.0.1:$port/small.gif; done
ORIGIN_WORKER=$(pgrep -f "nginx: worker process" -P "$(cat "$RUN/origin/nginx.pid")")

ticks() {   # pid: user and system clock ticks of all its threads
    cat /proc/"$1"/task/*/stat | sed 's/^.*) //' | awk '{u += $12; s += $13} END {print u, s}'
}
sleeps() {   # pid: voluntary context switches of all its threads and its children's
    local pid
    for pid in "$1" $(pgrep -P "$1"); do cat /proc/"$pid"/task/*/status; done \
        | awk '/^voluntary_ctxt_switches/ {n += $2} END {print n}'
}
load() {   # protocol url seconds
    if [ "$1" = h2c ]; then
        taskset -c 1 h2load -t1 -c10 -m10 -D"$3" "$2"
    else
        taskset -c 1 wrk -t1 -c100 -d"$3s" "$2"
    fi
}
row() {   # name pid port protocol path
    local name=$1 pid=$2 url="http://127.0.0.1:$3$5" u1 s1 u2 s2 o1 o2 c1 c2 client requests
    load "$4" "$url" 2 >/dev/null   # warm-up: stored, pools filled
    read -r u1 s1 < <(ticks "$pid"); o1=$(sleeps "$ORIGIN_WORKER")
    load "$4" "$url" "$SECONDS_PER_ROW" >"$RUN/load.out" & client=$!
    sleep 0.2; c1=$(sleeps "$client")
    sleep "$(awk -v s="$SECONDS_PER_ROW" 'BEGIN {print s - 0.5}')"; c2=$(sleeps "$client")
    wait "$client"
    read -r u2 s2 < <(ticks "$pid"); o2=$(sleeps "$ORIGIN_WORKER")
    requests=$(awk '/requests in/ {print $1} /^requests:/ {print $8}' "$RUN/load.out")
    awk -v n="$requests" -v u=$((u2 - u1)) -v s=$((s2 - s1)) -v hz="$(getconf CLK_TCK)" \
        -v o=$((o2 - o1)) -v c=$((c2 - c1)) -v d="$SECONDS_PER_ROW" -v name="$name" \
        -v what="$4 $5" 'BEGIN { us = 1e6 / hz / n
                 printf "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.3f | %.3f |\n", name, what, n / d,
                     u * us, s * us, (u + s) * us, c * d / (d - 0.5) / n, o / n }'
}
echo "| proxy | row | rps | user µs/req | system µs/req | total | client sleeps/req | origin sleeps/req |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for _ in $(seq "$ROUNDS"); do
    for what in "${ROWS[@]}"; do
        # HAProxy speaks h2c on a bind of its own (`proto h2`); edgecache on any listener.
        port=$HAPROXY_PORT; [ "${what%% *}" = h2c ] && port=$((HAPROXY_PORT + 1))
        # shellcheck disable=SC2086 # two words: protocol and path
        row haproxy "$HAPROXY" $port $what
        # shellcheck disable=SC2086
        row edgecache "$EDGE" $EDGE_PORT $what
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
