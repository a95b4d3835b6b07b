//! Arbitrary bytes as one client connection (HTTP/1.x or h2c prior knowledge) to a real
//! edgecache in front of the demo origin: nothing panics, and the proxy closes the connection
//! once the client has sent everything (no stall). Panics in the proxy's own tasks abort the
//! process too (libfuzzer-sys installs an aborting panic hook), so they are found as well.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(stalled) = edgecache_runtime::fuzzing::serve_bytes(data) {
        panic!("{stalled}");
    }
});
