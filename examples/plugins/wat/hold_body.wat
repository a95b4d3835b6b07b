;; hold_body.wat: holds a response at the end of its body until the plugin's next tick.
;;
;; A hand-written proxy-wasm 0.2.1 plugin for the tests of a pause in the body phase. Before
;; the end of a response body it asks for more (`Pause`); at the end (`end_of_stream`) it
;; appends `+held` to the body and pauses the stream. Its tick (every 20 ms) makes the held
;; stream effective, adds `x-resumed: tick` to its response and resumes it
;; (`proxy_continue_stream`). One held stream per instance at a time (a test plugin).
;; Load it as-is: edgecache accepts `.wat` text modules.
(module
  (import "env" "proxy_set_tick_period_milliseconds" (func $tick_period (param i32) (result i32)))
  (import "env" "proxy_set_buffer_bytes" (func $set_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_effective_context" (func $make_effective (param i32) (result i32)))
  (import "env" "proxy_continue_stream" (func $continue_stream (param i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "+held")
  (data (i32.const 32) "x-resumed")
  (data (i32.const 48) "tick")
  ;; A bump allocator over the first page, reset when it runs out (fine for a test plugin).
  (global $heap (mut i32) (i32.const 1024))
  ;; The context whose response is held (0: none).
  (global $held (mut i32) (i32.const 0))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $p i32)
    (if (i32.gt_u (i32.add (global.get $heap) (local.get $size)) (i32.const 65536))
      (then (global.set $heap (i32.const 1024))))
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32)
    (drop (call $tick_period (i32.const 20)))
    (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_response_body") (param $ctx i32) (param $size i32) (param $eos i32) (result i32)
    (if (local.get $eos)
      (then
        ;; buffer 1 = the response body; a start at its end appends
        (drop (call $set_buffer (i32.const 1) (local.get $size) (i32.const 0) (i32.const 16) (i32.const 5)))
        (global.set $held (local.get $ctx))))
    ;; 1 = Pause: before the end, "more please"; at the end, hold the response
    (i32.const 1))
  (func (export "proxy_on_tick") (param i32)
    (if (global.get $held)
      (then
        (drop (call $make_effective (global.get $held)))
        ;; map 2 = the response headers
        (drop (call $add_header (i32.const 2) (i32.const 32) (i32.const 9) (i32.const 48) (i32.const 4)))
        (drop (call $continue_stream (i32.const 1)))
        (global.set $held (i32.const 0)))))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32))
)
