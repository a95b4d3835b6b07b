;; trap.wat: traps (`unreachable`) in proxy_on_request_headers.
;;
;; A hand-written proxy-wasm 0.2.1 plugin for the sandbox tests. It traps when the request has an `x-trap` header.
;; Requests without the header pass; every response gets `x-wat: trap`, so a test can
;; show that the next request is served (by a fresh instance) after a failure.
;; Load it as-is: edgecache accepts `.wat` text modules.
(module
  (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-trap")
  (data (i32.const 32) "x-wat")
  (data (i32.const 48) "trap")
  (data (i32.const 64) "trap.wat: about to trap")
  ;; A bump allocator over the first page, reset when it runs out (fine for a test plugin).
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $p i32)
    (if (i32.gt_u (i32.add (global.get $heap) (local.get $size)) (i32.const 65536))
      (then (global.set $heap (i32.const 1024))))
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    ;; status 0 (OK) = the header is present
    (if (i32.eqz (call $get_header (i32.const 0) (i32.const 16) (i32.const 6) (i32.const 256) (i32.const 260)))
      (then
        (drop (call $log (i32.const 3) (i32.const 64) (i32.const 23)))
        unreachable))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 32) (i32.const 5) (i32.const 48) (i32.const 4)))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32))
)
