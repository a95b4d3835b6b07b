//! `cookie.*` (Varnish's vmod_cookie): a task's cookies, parsed from a `Cookie` header, edited,
//! and written back with `cookie.get_string()`.

use std::borrow::Cow;

use super::pattern_arg;
use crate::compile::Program;
use crate::eval::Context;
use crate::tree::{CookieFn, Expr};
use crate::vocab::pattern::Pattern;
use crate::vocab::Value;

/// The parsed cookies, in order; a name appears once.
#[derive(Debug, Clone, Default)]
pub(super) struct Jar {
    cookies: Vec<(String, String)>,
}

impl Jar {
    /// `cookie.parse`: as Varnish, leading blanks are skipped, a name runs to the next `=` and
    /// its value to the next `;`; parsing stops at a cookie without `=`. An empty header keeps
    /// what was parsed before; any other replaces it.
    fn parse(&mut self, header: &str) {
        if header.is_empty() {
            return;
        }
        self.cookies.clear();
        let mut rest = header;
        loop {
            rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let Some((name, after)) = rest.split_once('=') else {
                break;
            };
            let (value, next) = match after.split_once(';') {
                Some((value, next)) => (value, Some(next)),
                None => (after, None),
            };
            self.set(name, value);
            match next {
                Some(next) => rest = next,
                None => break,
            }
        }
    }

    /// `cookie.set`: replaces the value in place, or adds the cookie last. An empty name or
    /// value is ignored.
    fn set(&mut self, name: &str, value: &str) {
        if name.is_empty() || value.is_empty() {
            return;
        }
        match self.cookies.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value.to_string(),
            None => self.cookies.push((name.to_string(), value.to_string())),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of the first cookie whose name matches.
    fn get_re(&self, re: &Pattern) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| re.is_match(n))
            .map(|(_, v)| v.as_str())
    }

    fn delete(&mut self, name: &str) {
        self.cookies.retain(|(n, _)| n != name);
    }

    /// `cookie.keep` (`keep`) / `cookie.filter`: the cookies named in the comma-separated
    /// `list` are kept (the others dropped) or dropped. Blanks before a name are skipped.
    fn retain_listed(&mut self, list: &str, keep: bool) {
        let names: Vec<&str> = list
            .split(',')
            .map(|n| n.trim_start_matches(|c: char| c.is_ascii_whitespace()))
            .filter(|n| !n.is_empty())
            .collect();
        self.cookies.retain(|(n, _)| names.contains(&n.as_str()) == keep);
    }

    /// `cookie.keep_re` (`keep`) / `cookie.filter_re`: by whether the name matches.
    fn retain_matching(&mut self, re: &Pattern, keep: bool) {
        self.cookies.retain(|(n, _)| re.is_match(n) == keep);
    }

    /// `cookie.get_string`: `a=1; b=2;`, as Varnish 7 writes it.
    fn to_header(&self) -> String {
        let parts: Vec<String> = self.cookies.iter().map(|(n, v)| format!("{n}={v};")).collect();
        parts.join(" ")
    }
}

pub(super) fn effect(f: CookieFn, strings: &[String], args: &[Expr], ctx: &mut dyn Context) {
    let Some(task) = ctx.task_mut() else { return };
    let jar = &mut task.cookies;
    let text = |i: usize| strings.get(i).map_or("", String::as_str);
    match f {
        CookieFn::Clean => jar.cookies.clear(),
        CookieFn::Delete => jar.delete(text(0)),
        CookieFn::Filter => jar.retain_listed(text(0), false),
        CookieFn::Keep => jar.retain_listed(text(0), true),
        CookieFn::FilterRe | CookieFn::KeepRe => {
            if let Some(re) = pattern_arg(args, 0) {
                jar.retain_matching(re, f == CookieFn::KeepRe);
            }
        }
        CookieFn::Parse => jar.parse(text(0)),
        CookieFn::Set => jar.set(text(0), text(1)),
        CookieFn::FormatDate | CookieFn::Get | CookieFn::GetRe | CookieFn::GetString | CookieFn::Isset => {}
    }
}

pub(super) fn value<'a>(p: &'a Program, f: CookieFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let jar = ctx.task().map(|t| &t.cookies);
    let found = |v: Option<&'a str>| v.map_or(Value::Unset, Value::str);
    match f {
        CookieFn::Get => found(jar.and_then(|j| j.get(&p.string_arg(args, 0, ctx)))),
        CookieFn::GetRe => found(jar.zip(pattern_arg(args, 0)).and_then(|(j, re)| j.get_re(re))),
        CookieFn::GetString => Value::Str(Cow::Owned(jar.map(Jar::to_header).unwrap_or_default())),
        CookieFn::Isset => {
            let name = p.string_arg(args, 0, ctx);
            Value::Bool(!name.is_empty() && jar.is_some_and(|j| j.get(&name).is_some()))
        }
        CookieFn::FormatDate => {
            let now = args.first().and_then(|e| p.eval(e, ctx).as_real()).unwrap_or(0.0);
            let delta = args
                .get(1)
                .and_then(|e| p.eval(e, ctx).as_duration())
                .unwrap_or(0.0);
            Value::Str(Cow::Owned(p.to_string_owned(Value::Time(now + delta))))
        }
        _ => Value::Unset,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::TestContext;
    use crate::{load_str, Scope, Sub};

    /// `vcl_recv` of a policy importing cookie, run on a request with `cookie`, and what it set
    /// in `req.http.x`.
    fn recv(body: &str, cookie: Option<&str>) -> Option<String> {
        let src = format!(
            "vcl 4.1;\nimport cookie;\nimport std;\nbackend default {{ .host = \"127.0.0.1\"; }}\nsub vcl_recv {{\n{body}\nreturn (pass);\n}}\n"
        );
        let program = load_str("cookie.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::request("GET", "/");
        if let Some(cookie) = cookie {
            ctx = ctx.header(Scope::Req, "cookie", cookie);
        }
        program.run(Sub::Recv, &mut ctx);
        ctx.get_header(Scope::Req, "x")
    }

    // The examples of Varnish 7.7's vmod_cookie documentation, with get_string()'s result.
    #[test]
    fn delete_removes_one_cookie() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2\");\ncookie.delete(\"cookie2\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("cookie1=value1;"));
    }

    #[test]
    fn filter_removes_the_listed_cookies() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2; cookie3=value3\");\ncookie.filter(\"cookie1,cookie2\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("cookie3=value3;"));
    }

    #[test]
    fn filter_re_removes_the_matching_cookies() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2; cookie3=value3\");\ncookie.filter_re(\"^cookie[12]$\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("cookie3=value3;"));
    }

    #[test]
    fn keep_keeps_only_the_listed_cookies() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2; cookie3=value3\");\ncookie.keep(\"cookie1,cookie2\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("cookie1=value1; cookie2=value2;"));
    }

    #[test]
    fn keep_re_keeps_only_the_matching_cookies() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2; cookie3=value3\");\ncookie.keep_re(\"^cookie[12]$\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("cookie1=value1; cookie2=value2;"));
    }

    #[test]
    fn get_and_get_re_read_one_value() {
        let got = recv(
            "cookie.parse(\"cookie1=value1; cookie2=value2\");\nset req.http.x = cookie.get(\"cookie1\") + \",\" + cookie.get_re(\"^cookie2$\") + \",\" + cookie.get(\"nope\");",
            None,
        );
        assert_eq!(got.as_deref(), Some("value1,value2,"));
    }

    #[test]
    fn isset_and_set() {
        let got = recv(
            "cookie.set(\"cookie1\", \"value1\");\nif (cookie.isset(\"cookie1\") && !cookie.isset(\"cookie2\")) { set req.http.x = cookie.get(\"cookie1\"); }",
            None,
        );
        assert_eq!(got.as_deref(), Some("value1"));
    }

    // The filtering example at the top of the documentation, on a request's Cookie header.
    #[test]
    fn the_documented_filtering_example() {
        let body = "if (req.http.cookie) {\n cookie.parse(req.http.cookie);\n cookie.keep(\"SESSIONID,PHPSESSID\");\n set req.http.cookie = cookie.get_string();\n if (req.http.cookie == \"\") { unset req.http.cookie; }\n}\nif (req.http.cookie) { set req.http.x = req.http.cookie; } else { set req.http.x = \"(unset)\"; }";
        let got = recv(body, Some("_ga=GA1.2.3; SESSIONID=abc; _gid=4; PHPSESSID=def"));
        assert_eq!(got.as_deref(), Some("SESSIONID=abc; PHPSESSID=def;"));
        assert_eq!(
            recv(body, Some("_ga=GA1.2.3; _gid=4")).as_deref(),
            Some("(unset)")
        );
    }

    #[test]
    fn parse_follows_varnish_on_odd_headers() {
        let got = recv(
            "cookie.parse(\"a=1;b=2;  c=3=x; empty=; d=4; novalue; e=5\");\nset req.http.x = cookie.get_string();",
            None,
        );
        // `empty=` is ignored (no value); `novalue` has no `=`, so its name runs to the next
        // one: `novalue; e` (Varnish's reading).
        assert_eq!(got.as_deref(), Some("a=1; b=2; c=3=x; d=4; novalue; e=5;"));
        // A second parse replaces the first; an empty header changes nothing.
        let got = recv(
            "cookie.parse(\"a=1\");\ncookie.parse(\"b=2\");\ncookie.parse(\"\");\nset req.http.x = cookie.get_string();",
            None,
        );
        assert_eq!(got.as_deref(), Some("b=2;"));
    }

    #[test]
    fn format_date_is_an_http_date() {
        let got = recv(
            "set req.http.x = cookie.format_date(std.real2time(0.0, now), 5m);",
            None,
        );
        assert_eq!(got.as_deref(), Some("Thu, 01 Jan 1970 00:05:00 GMT"));
    }
}
