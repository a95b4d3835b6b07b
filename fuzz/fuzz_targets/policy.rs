//! Arbitrary bytes as a policy file: loading (parse, check, compile) never panics, the
//! diagnostics render, and a policy that loads runs every sub without panicking. Hangs are
//! caught by libFuzzer's `-timeout` (see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_lang::testing::TestContext;
use policy_lang::Sub;

fuzz_target!(|data: &[u8]| {
    // Policy files are text; the runtime refuses other bytes before the parser sees them.
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    match policy_lang::load_str("fuzz.vcl", source) {
        Ok(program) => {
            if let Some(warnings) = program.warnings() {
                let _ = warnings.render();
            }
            for sub in Sub::ALL {
                let mut ctx = match sub {
                    Sub::BackendFetch | Sub::BackendResponse | Sub::BackendError => {
                        TestContext::backend_response(200, 120.0)
                    }
                    _ => TestContext::request("GET", "/index.html"),
                };
                let _ = program.run(sub, &mut ctx);
            }
        }
        Err(diagnostics) => {
            let _ = diagnostics.render();
        }
    }
});
