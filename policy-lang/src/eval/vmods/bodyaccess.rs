//! `bodyaccess.*` (varnish-modules' vmod_bodyaccess): the request body `std.cache_req_body`
//! buffered, hashed into the cache key (POST caching), measured, matched and logged.

use std::borrow::Cow;

use super::pattern_arg;
use crate::eval::Context;
use crate::tree::{BodyFn, Expr};
use crate::vocab::Value;

/// `log_req_body`'s default chunk length, as in vmod_bodyaccess.
const LOG_CHUNK: usize = 200;

pub(super) fn effect(f: BodyFn, strings: &[String], ctx: &mut dyn Context) {
    let Some(body) = ctx.req_body().map(<[u8]>::to_vec) else {
        ctx.log("bodyaccess: the request body is not cached; call std.cache_req_body() first");
        return;
    };
    match f {
        BodyFn::Hash => ctx.hash_data(&as_text(&body)),
        BodyFn::Log => {
            let prefix = strings.first().map_or("", String::as_str);
            let length = strings
                .get(1)
                .and_then(|l| l.parse::<usize>().ok())
                .filter(|l| *l > 0)
                .unwrap_or(LOG_CHUNK);
            for chunk in body.chunks(length) {
                ctx.log(&format!("{prefix}{}", String::from_utf8_lossy(chunk)));
            }
        }
        BodyFn::Len | BodyFn::Rematch => {}
    }
}

pub(super) fn value<'a>(f: BodyFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let body = ctx.req_body();
    match f {
        // -1: not cached, as vmod_bodyaccess answers.
        BodyFn::Len => Value::Int(body.map_or(-1, |b| b.len() as i64)),
        BodyFn::Rematch => Value::Int(match (body, pattern_arg(args, 0)) {
            (Some(body), Some(re)) => i64::from(re.is_match(&String::from_utf8_lossy(body))),
            _ => -1,
        }),
        BodyFn::Hash | BodyFn::Log => Value::Unset,
    }
}

/// The body for `hash_data`: as it is when it is text, else its bytes in hex (so two bodies
/// that differ only in invalid UTF-8 still hash apart).
fn as_text(body: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(body) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(body.iter().map(|b| format!("{b:02x}")).collect()),
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::TestContext;
    use crate::{load_str, Action, Scope, Sub};

    /// vmod_bodyaccess's example: POSTs cached by body, a body over the limit refused.
    const POLICY: &str = r#"vcl 4.1;
import std;
import bodyaccess;
backend default { .host = "127.0.0.1"; }
sub vcl_recv {
    unset req.http.X-Body-Len;
    if (req.method == "POST") {
        if (!std.cache_req_body(1KB)) {
            return (synth(413, "The request body size exceeds the limit"));
        }
        set req.http.X-Body-Len = bodyaccess.len_req_body();
        if (bodyaccess.rematch_req_body({"(?i)"query"\s*:\s*"mutation"}) == 1) {
            return (pass);
        }
        bodyaccess.log_req_body("body: ", 4);
        return (hash);
    }
}
sub vcl_hash {
    bodyaccess.hash_req_body();
}
"#;

    fn post(body: Option<&[u8]>) -> TestContext {
        let mut ctx = TestContext::request("POST", "/graphql");
        ctx.req_body = body.map(<[u8]>::to_vec);
        ctx
    }

    #[test]
    fn post_bodies_are_measured_matched_logged_and_hashed() {
        let p = load_str("b.vcl", POLICY).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = post(Some(b"{\"query\":\"{a}\"}"));
        assert_eq!(p.run(Sub::Recv, &mut ctx), Action::Lookup);
        assert_eq!(ctx.get_header(Scope::Req, "x-body-len").as_deref(), Some("15"));
        assert_eq!(ctx.logs[..2], ["body: {\"qu", "body: ery\""]);
        p.run(Sub::Hash, &mut ctx);
        let with_body = ctx.hash.clone();
        let mut other = post(Some(b"{\"query\":\"{b}\"}"));
        p.run(Sub::Recv, &mut other);
        p.run(Sub::Hash, &mut other);
        assert_ne!(other.hash, with_body, "another body, another key");

        let mut mutation = post(Some(b"{\"query\": \"mutation { x }\"}"));
        assert_eq!(p.run(Sub::Recv, &mut mutation), Action::Pass);
        // Not buffered (over the limit the runtime buffers): refused.
        let mut big = post(None);
        assert!(matches!(
            p.run(Sub::Recv, &mut big),
            Action::Synth { status: 413, .. }
        ));
        assert_eq!(p.req_body_limit(), Some(1024));
    }
}
