#!/usr/bin/env bash
# Builds the example proxy-wasm plugins and copies them to dist/:
#  - the Rust ones (add_header, api_key, body_rewrite, bucket, grpc_auth, http_auth, json_validator,
#    postpone, stats) for wasm32-wasip1;
#  - the AssemblyScript one (assemblyscript/ → as_add_header.wasm), only when npm is present.
# Usage: examples/plugins/build.sh   (from anywhere). Needs rustup and network access the
# first time (the target and the proxy-wasm crate; the npm packages pinned in
# assemblyscript/package-lock.json, installed with `npm ci` and reused afterwards).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rustup target add wasm32-wasip1 >/dev/null 2>&1 || rustup target add wasm32-wasip1
cd "$here"
# Own target dir so that the root workspace's builds never share or lock it.
export CARGO_TARGET_DIR="$here/target"
cargo build --release --target wasm32-wasip1 --quiet
mkdir -p dist
for p in add_header api_key body_rewrite bucket grpc_auth http_auth json_validator postpone stats; do
  cp "target/wasm32-wasip1/release/$p.wasm" "dist/$p.wasm.tmp"
  mv "dist/$p.wasm.tmp" "dist/$p.wasm"
done

# AssemblyScript (@solo-io/proxy-runtime + assemblyscript from npm, exact versions in
# package-lock.json). A missing npm, or an `npm ci` that cannot reach the registry, skips
# this plugin with a message (and removes a stale dist/as_add_header.wasm so that nothing
# tests an old build); a compile error fails the script.
build_as() {
  local dir="$here/assemblyscript"
  if ! command -v npm >/dev/null 2>&1; then
    echo "build.sh: npm not found: skipping the AssemblyScript plugin (install Node.js with npm to build dist/as_add_header.wasm)" >&2
    rm -f dist/as_add_header.wasm
    return 0
  fi
  (
    cd "$dir"
    # One build at a time (parallel test runs call this script too).
    if command -v flock >/dev/null 2>&1; then
      exec 9>"$dir/.build.lock"
      flock 9
    fi
    # Reuse node_modules when it was installed from the current lock file (offline-friendly).
    if [[ ! -x node_modules/.bin/asc || ! -f node_modules/.package-lock.json ||
      package-lock.json -nt node_modules/.package-lock.json ||
      package.json -nt node_modules/.package-lock.json ]]; then
      if ! npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1; then
        cat npm-ci.log >&2
        echo "build.sh: npm ci failed (is the npm registry reachable?): skipping the AssemblyScript plugin" >&2
        exit 3
      fi
    fi
    mkdir -p build
    # Compiling takes a few seconds (binaryen): skip it when the output is up to date.
    local out=build/as_add_header.wasm
    if [[ -f $out && -z $(find assembly package.json package-lock.json \
      node_modules/.package-lock.json "$here/build.sh" -newer "$out" -print -quit) ]]; then
      exit 0
    fi
    # The SDK's own sources give one AS201 warning; show the compiler output only on failure.
    if ! node_modules/.bin/asc assembly/index.ts -b build/as_add_header.wasm.tmp \
      --use abort=abort_proc_exit --optimize >asc.log 2>&1; then
      cat asc.log >&2
      echo "build.sh: the AssemblyScript plugin does not compile" >&2
      exit 1
    fi
    mv build/as_add_header.wasm.tmp build/as_add_header.wasm
  ) || {
    local rc=$?
    if [[ $rc == 3 ]]; then
      rm -f dist/as_add_header.wasm
      return 0
    fi
    return "$rc"
  }
  cp assemblyscript/build/as_add_header.wasm dist/as_add_header.wasm.tmp
  mv dist/as_add_header.wasm.tmp dist/as_add_header.wasm
}
build_as

echo "built: $(cd dist && ls *.wasm | tr '\n' ' ')"
