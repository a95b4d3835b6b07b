//! `header.*` (varnish-modules' vmod_header): the lines of a repeated header, such as
//! `Set-Cookie`, one by one.

use std::borrow::Cow;

use http::HeaderName;

use super::pattern_arg;
use crate::eval::Context;
use crate::tree::{Expr, HeaderFn};
use crate::vocab::pattern::Pattern;
use crate::vocab::{Scope, Value};

/// Argument `i`, a header the checker resolved.
fn header_arg(args: &[Expr], i: usize) -> Option<(Scope, &HeaderName)> {
    match args.get(i) {
        Some(Expr::Header(scope, name)) => Some((*scope, name)),
        _ => None,
    }
}

/// As vmod_header: the regex sees the value without its leading blanks, and an empty value
/// never matches.
fn matches(re: &Pattern, value: &str) -> bool {
    let value = value.trim_start_matches([' ', '\t']);
    !value.is_empty() && re.is_match(value)
}

pub(super) fn effect(f: HeaderFn, strings: &[String], args: &[Expr], ctx: &mut dyn Context) {
    match f {
        HeaderFn::Append => {
            if let Some((scope, name)) = header_arg(args, 0) {
                ctx.append_header(scope, name, strings.get(1).cloned().unwrap_or_default());
            }
        }
        HeaderFn::Copy => {
            let (Some((from, src)), Some((to, dst))) = (header_arg(args, 0), header_arg(args, 1)) else {
                return;
            };
            let values: Vec<String> = ctx
                .header_values(from, src)
                .into_iter()
                .map(|v| v.trim_start_matches([' ', '\t']).to_string())
                .collect();
            for value in values {
                ctx.append_header(to, dst, value);
            }
        }
        HeaderFn::Remove => {
            let (Some((scope, name)), Some(re)) = (header_arg(args, 0), pattern_arg(args, 1)) else {
                return;
            };
            let kept: Vec<String> = ctx
                .header_values(scope, name)
                .into_iter()
                .filter(|v| !matches(re, v))
                .map(Cow::into_owned)
                .collect();
            ctx.set_header_values(scope, name, kept);
        }
        HeaderFn::Get => {}
    }
}

pub(super) fn value<'a>(f: HeaderFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let (HeaderFn::Get, Some((scope, name)), Some(re)) = (f, header_arg(args, 0), pattern_arg(args, 1))
    else {
        return Value::Unset;
    };
    ctx.header_values(scope, name)
        .into_iter()
        .find(|v| matches(re, v))
        .map_or(Value::Unset, |v| match v {
            Cow::Borrowed(v) => Value::str(v.trim_start_matches([' ', '\t'])),
            Cow::Owned(v) => Value::Str(Cow::Owned(v.trim_start_matches([' ', '\t']).to_string())),
        })
}

#[cfg(test)]
mod tests {
    use crate::testing::TestContext;
    use crate::{load_str, Scope, Sub};

    /// `vcl_backend_response` of a policy importing header, on a response with `set_cookies`.
    fn backend_response(body: &str, set_cookies: &[&str]) -> TestContext {
        let src = format!(
            "vcl 4.1;\nimport header;\nbackend default {{ .host = \"127.0.0.1\"; }}\nsub vcl_backend_response {{\n{body}\n}}\n"
        );
        let program = load_str("header.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::backend_response(200, 120.0);
        for cookie in set_cookies {
            ctx = ctx.header(Scope::Beresp, "set-cookie", cookie);
        }
        program.run(Sub::BackendResponse, &mut ctx);
        ctx
    }

    fn lines(ctx: &TestContext, name: &str) -> Vec<String> {
        ctx.headers
            .iter()
            .filter(|(s, n, _)| *s == Scope::Beresp && n.as_str() == name)
            .map(|(_, _, v)| v.clone())
            .collect()
    }

    // The example at the top of varnish-modules' vmod_header documentation.
    #[test]
    fn the_documented_example_appends_and_removes_lines() {
        let ctx = backend_response(
            "if (beresp.http.Set-Cookie) {\n header.append(beresp.http.Set-Cookie, \"VSESS=abbabeef\");\n header.remove(beresp.http.Set-Cookie, \"JSESSIONID=\");\n}",
            &["JSESSIONID=1234; Path=/", "theme=dark"],
        );
        assert_eq!(lines(&ctx, "set-cookie"), ["theme=dark", "VSESS=abbabeef"]);
    }

    #[test]
    fn copy_copies_every_line() {
        let ctx = backend_response(
            "header.copy(beresp.http.set-cookie, beresp.http.x-old-cookie);",
            &["a=1", "b=2"],
        );
        assert_eq!(lines(&ctx, "x-old-cookie"), ["a=1", "b=2"]);
        assert_eq!(lines(&ctx, "set-cookie"), ["a=1", "b=2"]);
    }

    #[test]
    fn get_returns_the_first_matching_line() {
        let ctx = backend_response(
            "set beresp.http.xusr = header.get(beresp.http.set-cookie, \"user=\");\nset beresp.http.none = header.get(beresp.http.set-cookie, \"nobody=\");",
            &["session=9", "user=jo; Path=/", "user=other"],
        );
        assert_eq!(lines(&ctx, "xusr"), ["user=jo; Path=/"]);
        assert_eq!(lines(&ctx, "none"), [""]);
    }

    #[test]
    fn remove_with_a_negative_look_ahead_keeps_the_named_cookie() {
        let ctx = backend_response(
            "header.remove(beresp.http.set-cookie, \"^(?!(funcookie=))\");",
            &["a=1", "funcookie=yes", "b=2"],
        );
        assert_eq!(lines(&ctx, "set-cookie"), ["funcookie=yes"]);
    }

    #[test]
    fn header_functions_are_checked_like_the_headers_they_touch() {
        let errs = |body: &str| {
            let src =
                format!("vcl 4.1;\nimport header;\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n");
            load_str("header.vcl", &src)
                .map(|_| String::new())
                .unwrap_or_else(|d| d.render())
        };
        let r = errs("sub vcl_recv { header.append(beresp.http.x, \"1\"); }");
        assert!(r.contains("`beresp.http.x` is not writable in `vcl_recv`"), "{r}");
        let r = errs("sub vcl_recv { header.append(\"x\", \"1\"); }");
        assert!(r.contains("`header.append` expects a header"), "{r}");
        let r = errs("sub vcl_recv { header.remove(req.http.x, req.url); }");
        assert!(
            r.contains("`header.remove` takes its regex as a string literal"),
            "{r}"
        );
        let r = errs("sub vcl_recv { set req.http.y = header.append(req.http.x, \"1\"); }");
        assert!(r.contains("`header.append` does not return a value"), "{r}");
    }
}
