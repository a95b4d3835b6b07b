;; read2_set1.wat: the plugin `benches/plugin.rs` measures: reads two request headers and
;; sets one, the smallest useful header plugin (what a variant/bucketing plugin does).
;;
;; proxy_on_request_headers reads `user-agent` and `accept-encoding` (two
;; proxy_get_header_map_value calls: the host copies each value into guest memory through
;; proxy_on_memory_allocate) and sets request header `x-variant` with
;; proxy_replace_header_map_value: `gzip` when accept-encoding is present, else `identity`.
;; The other callbacks do nothing. Hand-written proxy-wasm 0.2.1, loaded as-is (.wat).
(module
  (import "env" "proxy_get_header_map_value" (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_replace_header_map_value" (func $replace (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "user-agent")
  (data (i32.const 32) "accept-encoding")
  (data (i32.const 48) "x-variant")
  (data (i32.const 64) "gzip")
  (data (i32.const 80) "identity")
  ;; return slots: 200/204 user-agent (ptr, len), 208/212 accept-encoding (ptr, len)
  ;; A bump allocator from 1024, reset at the start of every request (values are not kept).
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
    (local $ua i32)
    (local $ae i32)
    (global.set $heap (i32.const 1024))
    ;; map type 0 = request headers; status 0 (OK) = present
    (local.set $ua (i32.eqz (call $get (i32.const 0) (i32.const 16) (i32.const 10) (i32.const 200) (i32.const 204))))
    (local.set $ae (i32.eqz (call $get (i32.const 0) (i32.const 32) (i32.const 15) (i32.const 208) (i32.const 212))))
    (if (local.get $ae)
      (then (drop (call $replace (i32.const 0) (i32.const 48) (i32.const 9) (i32.const 64) (i32.const 4))))
      (else (drop (call $replace (i32.const 0) (i32.const 48) (i32.const 9) (i32.const 80) (i32.const 8)))))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32))
)
