# Sourced by the bench scripts (from the repository root) as `. benches/run_dir.sh NAME`:
# a scratch directory $RUN (/tmp/edgecache-NAME.*) and $PIDS, the processes the script starts;
# on exit those are killed and the directory removed.
RUN=$(mktemp -d "/tmp/edgecache-$1.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT
