;; go_like.wat: what a Go SDK plugin (Go 1.24+, GOOS=wasip1 GOARCH=wasm -buildmode=c-shared)
;; needs from the host, for CI, which cannot build Go plugins: the reactor convention
;; (`_initialize`, no `_start`), `proxy_abi_version_0_2_1`, and the WASI calls the Go runtime
;; makes: `poll_oneoff` with a clock subscription while the runtime starts (its scheduler
;; sleeping), and a panic written to stderr with `fd_write(2, ...)` a few bytes at a time, as
;; the Go runtime prints it, followed by `proc_exit(2)`.
;;
;; `_initialize` polls one clock subscription and traps unless exactly one event came back for
;; it with no error. A request with `x-panic` "panics" the Go way; every response gets
;; `x-wat: go_like`.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "env" "proxy_get_header_map_value" (func $get_header (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_header (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-panic")
  (data (i32.const 32) "x-wat")
  (data (i32.const 48) "go_like")
  (data (i32.const 64) "panic: boom in the Go runtime\n")
  ;; iovecs for fd_write at 128, 136, 144: "panic: " (ptr 64, len 7), "boom in the Go runtime"
  ;; (ptr 71, len 22), "\n" (ptr 93, len 1)
  (data (i32.const 128) "\40\00\00\00\07\00\00\00\47\00\00\00\16\00\00\00\5d\00\00\00\01\00\00\00")
  ;; one clock subscription at 256 (48 bytes): userdata 0x2a, tag 0 (clock), clock id 1
  ;; (monotonic), timeout 1 ms relative
  (data (i32.const 256) "\2a\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\40\42\0f\00\00\00\00\00")
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "_initialize")
    ;; events at 512, count at 600
    (if (i32.ne (call $poll (i32.const 256) (i32.const 512) (i32.const 1) (i32.const 600)) (i32.const 0))
      (then unreachable))
    (if (i32.ne (i32.load (i32.const 600)) (i32.const 1)) (then unreachable))
    ;; the event's userdata is the subscription's, its errno 0, its type clock
    (if (i64.ne (i64.load (i32.const 512)) (i64.const 42)) (then unreachable))
    (if (i32.ne (i32.load16_u (i32.const 520)) (i32.const 0)) (then unreachable)))
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
    (if (i32.eqz (call $get_header (i32.const 0) (i32.const 16) (i32.const 7) (i32.const 700) (i32.const 704)))
      (then
        (drop (call $fd_write (i32.const 2) (i32.const 128) (i32.const 1) (i32.const 708)))
        (drop (call $fd_write (i32.const 2) (i32.const 136) (i32.const 1) (i32.const 708)))
        (drop (call $fd_write (i32.const 2) (i32.const 144) (i32.const 1) (i32.const 708)))
        (call $exit (i32.const 2))))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add_header (i32.const 2) (i32.const 32) (i32.const 5) (i32.const 48) (i32.const 7)))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32))
)
