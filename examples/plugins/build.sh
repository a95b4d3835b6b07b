#!/usr/bin/env bash
# Builds the example proxy-wasm plugins for wasm32-wasip1 and copies them to dist/.
# Usage: examples/plugins/build.sh   (from anywhere). Needs rustup and network access the
# first time (the target and the proxy-wasm crate).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rustup target add wasm32-wasip1 >/dev/null 2>&1 || rustup target add wasm32-wasip1
cd "$here"
# Own target dir so that the root workspace's builds never share or lock it.
export CARGO_TARGET_DIR="$here/target"
cargo build --release --target wasm32-wasip1 --quiet
mkdir -p dist
for p in add_header api_key bucket; do
  cp "target/wasm32-wasip1/release/$p.wasm" "dist/$p.wasm.tmp"
  mv "dist/$p.wasm.tmp" "dist/$p.wasm"
done
echo "built: $(cd dist && ls *.wasm | tr '\n' ' ')"
