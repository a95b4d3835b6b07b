#!/usr/bin/env bash
# A release binary built with profile-guided optimisation (PGO): the same code as
# `cargo build --release`, laid out by the compiler from a profile of edgecache serving load.
# On a proxy whose instructions per request match HAProxy's (docs/BENCHMARKS.md, "Session 16"),
# the time left is in how well those instructions run: where hot code sits, which branches are
# laid out straight, what is inlined. PGO decides those from measured counts.
#
# Three steps, each in a target directory of its own so `target/release` is left alone:
#   1. build an instrumented binary (`-Cprofile-generate`) in target/pgo-generate;
#   2. train it: the bench origin (`benches/bench_origin.py`), then 3 s of load on each path a
#      site sends through a cache (HTTP/1.1 and h2c hits and passes, HTTP/1.1 and h2 hits over
#      TLS), first with no policy and then with `examples/wordpress.vcl`, so the policy's code
#      is measured as well and not treated as cold; the profiles are merged with llvm-profdata;
#   3. build the binary with that profile (`-Cprofile-use`): target/pgo/release/edgecache.
#
# Needs wrk, h2load (nghttp2-client), python3, openssl, curl, and the toolchain's llvm-profdata
# (`rustup component add llvm-tools-preview`, done here if it is missing). Two release builds,
# about 20 minutes on 2 cores from cold, less once the dependencies are built.
#
#   benches/pgo_build.sh          # prints the binary's path when done
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk h2load openssl python3 curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install wrk nghttp2-client openssl python3 curl)" >&2; exit 1; }
done
PROFDATA="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | awk '/^host:/ {print $2}')/bin/llvm-profdata"
[ -x "$PROFDATA" ] || rustup component add llvm-tools-preview
. benches/run_dir.sh pgo
PORT=19560
until port_free $PORT && port_free $((PORT + 1)) && port_free $((PORT + 2)); do PORT=$((PORT + 20)); done
ORIGIN_PORT=$PORT PLAIN_PORT=$((PORT + 1)) TLS_PORT=$((PORT + 2))

# The flags name fixed paths, so a second run rebuilds only what changed; the training run
# writes its profiles where LLVM_PROFILE_FILE says.
RUSTFLAGS="-Cprofile-generate=$PWD/target/pgo-generate/profiles" \
    cargo build --release --bin edgecache --target-dir target/pgo-generate

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
python3 benches/bench_origin.py "$ORIGIN_PORT" & PIDS+=($!)
# Load before the origin listens would train edgecache's error path.
wait_for http://127.0.0.1:$ORIGIN_PORT/small
sed "s/\.port = \"8080\"/.port = \"$ORIGIN_PORT\"/" examples/wordpress.vcl >"$RUN/wordpress.vcl"

train() {   # extra edgecache flags: one instrumented run, its profile written when it exits
    LLVM_PROFILE_FILE="$RUN/profiles/edgecache-%p.profraw" RUST_LOG=warn \
        target/pgo-generate/release/edgecache -a 127.0.0.1:$PLAIN_PORT \
        -a 127.0.0.1:$TLS_PORT,tls --tls-cert "$RUN/cert.pem" --tls-key "$RUN/key.pem" \
        -b 127.0.0.1:$ORIGIN_PORT --threads 1 --no-watch -T off "$@" &
    local edge=$!
    wait_for http://127.0.0.1:$PLAIN_PORT/small
    for path in /small /dyn; do
        wrk -t1 -c16 -d3s "http://127.0.0.1:$PLAIN_PORT$path" >/dev/null
        h2load -c10 -m10 -D3 "http://127.0.0.1:$PLAIN_PORT$path" >/dev/null
    done
    wrk -t1 -c16 -d3s "https://localhost:$TLS_PORT/small" >/dev/null
    h2load -c10 -m10 -D3 "https://localhost:$TLS_PORT/small" >/dev/null
    kill -TERM "$edge"
    wait "$edge"
}
train
train -f "$RUN/wordpress.vcl"
ls "$RUN"/profiles/*.profraw >/dev/null 2>&1 || { echo "the instrumented runs wrote no profile in $RUN/profiles" >&2; exit 1; }
mkdir -p target/pgo
"$PROFDATA" merge -o "$RUN/edgecache.profdata" "$RUN"/profiles
# Named by its content: cargo does not look into a file the flags name, so a new profile must
# change the flags to be built with.
PROFILE="$PWD/target/pgo/edgecache-$(sha256sum "$RUN/edgecache.profdata" | cut -c1-16).profdata"
cp "$RUN/edgecache.profdata" "$PROFILE"
RUSTFLAGS="-Cprofile-use=$PROFILE" cargo build --release --bin edgecache --target-dir target/pgo
echo "target/pgo/release/edgecache"
