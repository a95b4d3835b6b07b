# Sourced by the bench scripts (from the repository root) as `. benches/run_dir.sh NAME`:
# a scratch directory $RUN (/tmp/edgecache-NAME.*) and $PIDS, the processes the script starts;
# on exit those are killed and the directory removed. With them, the scripts' two checks on
# the processes they start: `port_free PORT`, and `wait_for URL` (up to 30 s for a 2xx answer,
# else the script stops naming the URL).
RUN=$(mktemp -d "/tmp/edgecache-$1.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() {
    for _ in $(seq 300); do curl -sf -o /dev/null "$1" && return; sleep 0.1; done
    echo "no answer from $1 after 30 s" >&2
    exit 1
}
