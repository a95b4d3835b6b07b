//! The rewrite front end: the grammar's directives, each flag and variable run through the VCL
//! they become (loaded and run as any policy), and the diagnostics pinned by snapshots.

use std::sync::Arc;

use super::to_vcl;
use crate::diagnostics::{Diagnostics, Sink, SourceMap};
use crate::testing::TestContext;
use crate::{load_str, Action, Program, Scope, Sub, Value, Var};

const NAME: &str = "site.htaccess";

/// The VCL of `rules`, or the rendered diagnostics.
fn translate(rules: &str) -> Result<String, String> {
    let mut sm = SourceMap::new();
    let id = sm.add(NAME, rules);
    let mut sink = Sink::default();
    let vcl = to_vcl(id, sm.get(id), &mut sink);
    let rendered = Diagnostics::new(Arc::new(sm), sink.items).render();
    vcl.ok_or(rendered)
}

fn vcl(rules: &str) -> String {
    translate(rules).unwrap_or_else(|diagnostics| panic!("{diagnostics}"))
}

fn diagnostics(rules: &str) -> String {
    match translate(rules) {
        Ok(vcl) => panic!("loaded as\n{vcl}"),
        Err(rendered) => rendered,
    }
}

/// The rules loaded as their VCL, through the whole pipeline.
fn program(rules: &str) -> Program {
    let vcl = vcl(rules);
    load_str("site.vcl", &vcl).unwrap_or_else(|d| panic!("{}\n{vcl}", d.render()))
}

fn recv(program: &Program, ctx: &mut TestContext) -> Action {
    program.run(Sub::Recv, ctx)
}

fn get(url: &str) -> TestContext {
    TestContext::request("GET", url)
}

fn req_header(ctx: &TestContext, name: &str) -> Option<String> {
    ctx.get_header(Scope::Req, name)
}

fn url(ctx: &TestContext) -> String {
    match ctx.get_var(Var::ReqUrl) {
        Value::Str(url) => url.into_owned(),
        other => panic!("req.url is {other:?}"),
    }
}

/// `vcl_backend_response` for the backend request `ctx` (after `vcl_recv`) made, its response
/// `ttl` seconds fresh by its headers: the action and `beresp.ttl`.
fn backend_response(program: &Program, ctx: TestContext, ttl: f64) -> (Action, Value<'static>) {
    let mut ctx = ctx
        .to_backend()
        .var(Var::BerespStatus, Value::Int(200))
        .var(Var::BerespTtl, Value::Duration(ttl))
        .var(Var::BerespGrace, Value::Duration(10.0))
        .var(Var::BerespUncacheable, Value::Bool(false));
    let action = program.run(Sub::BackendResponse, &mut ctx);
    (action, ctx.get_var(Var::BerespTtl))
}

/// Whether the rule `RewriteRule ^ - [E=Cache-Control:no-cache]` guarded by `cond` passes
/// the request `ctx`.
fn cond_matches(cond: &str, mut ctx: TestContext) -> bool {
    let rules = format!("RewriteEngine on\n{cond}\nRewriteRule ^ - [E=Cache-Control:no-cache]\n");
    recv(&program(&rules), &mut ctx);
    req_header(&ctx, "x-rewrite-cache-control").as_deref() == Some("no-cache")
}

#[test]
fn the_two_line_rule_gives_test_php_a_45_second_ttl() {
    let p = program("RewriteEngine on\nRewriteRule test.php - [E=Cache-Control:max-age=45]\n");
    let mut ctx = get("/test.php?x=1");
    assert_eq!(recv(&p, &mut ctx), Action::Lookup);
    assert_eq!(
        backend_response(&p, ctx, 120.0),
        (Action::Deliver, Value::Duration(45.0))
    );
    let mut other = get("/index.php");
    assert_eq!(recv(&p, &mut other), Action::Lookup);
    let (_, ttl) = backend_response(&p, other, 120.0);
    assert_eq!(
        ttl,
        Value::Duration(120.0),
        "other URLs keep the TTL their headers give"
    );
}

#[test]
fn the_rules_decisions_cannot_be_sent_by_the_client() {
    let p = program("RewriteEngine on\nRewriteRule test.php - [E=Cache-Control:max-age=45]\n");
    let mut ctx = get("/other").header(Scope::Req, "x-rewrite-cache-control", "max-age=45");
    recv(&p, &mut ctx);
    assert_eq!(req_header(&ctx, "x-rewrite-cache-control"), None);
}

#[test]
fn a_rule_pattern_is_unanchored_and_case_sensitive_unless_nc() {
    let p = program("RewriteEngine on\nRewriteRule test\\.php - [E=Cache-Control:no-cache]\n");
    assert_eq!(recv(&p, &mut get("/dir/test.php")), Action::Pass);
    assert_eq!(recv(&p, &mut get("/TEST.php")), Action::Lookup);
    let p = program("RewriteEngine on\nRewriteRule ^test\\.php$ - [NC,E=Cache-Control:no-cache]\n");
    assert_eq!(recv(&p, &mut get("/TEST.PHP")), Action::Pass);
    assert_eq!(
        recv(&p, &mut get("/dir/test.php")),
        Action::Lookup,
        "`^` is the start of the path"
    );
    assert_eq!(
        recv(&p, &mut get("/test.php?q=1")),
        Action::Pass,
        "the pattern does not see the query"
    );
}

#[test]
fn a_negated_rule_pattern_matches_what_it_does_not() {
    let p = program("RewriteEngine on\nRewriteRule !^static/ - [E=Cache-Control:no-cache]\n");
    assert_eq!(recv(&p, &mut get("/static/a.css")), Action::Lookup);
    assert_eq!(recv(&p, &mut get("/cart")), Action::Pass);
}

#[test]
fn each_condition_variable_reads_its_part_of_the_request() {
    let cases: &[(&str, TestContext, TestContext)] = &[
        (
            "RewriteCond %{REQUEST_URI} ^/cart$",
            get("/cart?x=1"),
            get("/carts"),
        ),
        (
            "RewriteCond %{QUERY_STRING} (^|&)nocache=1",
            get("/a?nocache=1"),
            get("/a?nocache=0"),
        ),
        ("RewriteCond %{QUERY_STRING} ^$", get("/a"), get("/a?b")),
        (
            "RewriteCond %{REQUEST_METHOD} ^GET$",
            get("/"),
            TestContext::request("HEAD", "/"),
        ),
        (
            "RewriteCond %{HTTP_HOST} ^example\\.com$",
            get("/"),
            get("/").var(Var::ReqUrl, Value::Str("/".into())),
        ),
        (
            "RewriteCond %{HTTP_COOKIE} logged_in",
            get("/").header(Scope::Req, "cookie", "a=1; logged_in=1"),
            get("/").header(Scope::Req, "cookie", "a=1"),
        ),
        (
            "RewriteCond %{HTTP_USER_AGENT} Mobile [NC]",
            get("/").header(Scope::Req, "user-agent", "x MOBILE y"),
            get("/").header(Scope::Req, "user-agent", "desktop"),
        ),
        (
            "RewriteCond %{HTTP:X-Forwarded-Proto} =http",
            get("/").header(Scope::Req, "x-forwarded-proto", "http"),
            get("/").header(Scope::Req, "x-forwarded-proto", "https"),
        ),
        (
            "RewriteCond %{REMOTE_ADDR} ^127\\.0\\.0\\.1$",
            get("/"),
            get("/").var(Var::ClientIp, Value::Ip("10.0.0.1".parse().unwrap())),
        ),
        (
            "RewriteCond %{REQUEST_URI} !^/static/",
            get("/page"),
            get("/static/a.css"),
        ),
        (
            "RewriteCond %{HTTP_REFERER} ^https://partner\\.example/",
            get("/").header(Scope::Req, "referer", "https://partner.example/a"),
            get("/").header(Scope::Req, "referer", "https://other.example/"),
        ),
        (
            "RewriteCond %{HTTP_REFERER} =\"\"",
            get("/"),
            get("/").header(Scope::Req, "referer", "https://a.example/"),
        ),
        (
            "RewriteCond %{HTTP_ACCEPT} image/webp",
            get("/").header(Scope::Req, "accept", "image/avif,image/webp"),
            get("/").header(Scope::Req, "accept", "image/png"),
        ),
        (
            "RewriteCond %{HTTP_HOST} =EXAMPLE.com [NC]",
            get("/"),
            get("/").header(Scope::Req, "host", "www.example.com"),
        ),
    ];
    for (cond, matching, other) in cases {
        let other = if cond.contains("HTTP_HOST} ^") {
            let mut other = other.clone();
            other.clear_headers(Scope::Req);
            other.header(Scope::Req, "host", "www.example.com")
        } else {
            other.clone()
        };
        assert!(cond_matches(cond, matching.clone()), "{cond} should match");
        assert!(!cond_matches(cond, other), "{cond} should not match");
    }
}

#[test]
fn https_is_a_tls_test_decided_when_the_rules_load() {
    let on = vcl("RewriteEngine on\nRewriteCond %{HTTPS} on\nRewriteRule ^ - [E=Cache-Control:no-cache]\n");
    assert!(on.contains("&& (tls.is_tls() || proxy.is_ssl())"), "{on}");
    let off =
        vcl("RewriteEngine on\nRewriteCond %{HTTPS} !=on\nRewriteRule ^ - [E=Cache-Control:no-cache]\n");
    assert!(off.contains("&& !(tls.is_tls() || proxy.is_ssl())"), "{off}");
    // A plain test connection is not TLS.
    assert!(cond_matches("RewriteCond %{HTTPS} off", get("/")));
    assert!(!cond_matches("RewriteCond %{HTTPS} ^on$", get("/")));
}

#[test]
fn conditions_are_anded_and_or_joins_a_condition_to_the_next() {
    let conds = "RewriteCond %{HTTP:A} =1 [OR]\nRewriteCond %{HTTP:B} =1\nRewriteCond %{HTTP:C} =1";
    let with = |headers: &[&str]| {
        headers
            .iter()
            .fold(get("/"), |ctx, name| ctx.header(Scope::Req, name, "1"))
    };
    assert!(cond_matches(conds, with(&["a", "c"])));
    assert!(cond_matches(conds, with(&["b", "c"])));
    assert!(!cond_matches(conds, with(&["a", "b"])));
    assert!(!cond_matches(conds, with(&["c"])));
}

#[test]
fn l_stops_the_rules_and_s_skips_the_next() {
    let rules = "RewriteEngine on\n\
                 RewriteRule ^a - [E=Cache-Control:max-age=10,L]\n\
                 RewriteRule ^a - [E=Cache-Control:no-cache]\n\
                 RewriteRule ^b - [S=1]\n\
                 RewriteRule ^b - [E=Cache-Control:no-cache]\n\
                 RewriteRule ^c - [END]\n\
                 RewriteRule ^c - [E=Cache-Control:no-cache]\n";
    let p = program(rules);
    assert_eq!(
        recv(&p, &mut get("/a")),
        Action::Lookup,
        "L stops before the no-cache rule"
    );
    assert_eq!(
        recv(&p, &mut get("/b")),
        Action::Lookup,
        "S=1 skips the no-cache rule"
    );
    assert_eq!(recv(&p, &mut get("/c")), Action::Lookup, "END stops");
    let p = program("RewriteEngine on\nRewriteRule ^a - [E=Cache-Control:max-age=10]\nRewriteRule ^a - [E=Cache-Control:no-cache]\n");
    assert_eq!(
        recv(&p, &mut get("/a")),
        Action::Pass,
        "without L the last rule decides"
    );
}

#[test]
fn cache_control_values_pass_cache_and_mark() {
    let p = program("RewriteEngine on\nRewriteRule ^private - [E=Cache-Control:private]\nRewriteRule ^public - [E=Cache-Control:public]\nRewriteRule ^esi - [E=Cache-Control:esi=on]\nRewriteRule ^novary - [E=Cache-Control:no-vary]\n");
    assert_eq!(recv(&p, &mut get("/private")), Action::Pass);
    let mut with_cookie = get("/public").header(Scope::Req, "cookie", "a=1");
    assert_eq!(
        recv(&p, &mut with_cookie),
        Action::Pass,
        "a cookie still passes (reqCookieCache off)"
    );
    let mut public = get("/public");
    assert_eq!(recv(&p, &mut public), Action::Lookup);
    assert_eq!(
        backend_response(&p, public, 0.0).0,
        Action::Deliver,
        "public is stored whatever the origin says"
    );

    let mut esi = get("/esi");
    recv(&p, &mut esi);
    let mut esi = esi.to_backend().var(Var::BerespDoEsi, Value::Bool(false));
    p.run(Sub::BackendResponse, &mut esi);
    assert_eq!(esi.get_var(Var::BerespDoEsi), Value::Bool(true));

    let mut novary = get("/novary");
    recv(&p, &mut novary);
    let mut novary = novary.to_backend().header(Scope::Beresp, "vary", "User-Agent");
    p.run(Sub::BackendResponse, &mut novary);
    assert_eq!(novary.get_header(Scope::Beresp, "vary"), None);
}

#[test]
fn a_max_age_response_setting_a_cookie_is_left_to_the_builtin() {
    let p = program("RewriteEngine on\nRewriteRule ^ - [E=Cache-Control:max-age=45]\n");
    let mut ctx = get("/");
    recv(&p, &mut ctx);
    let ctx = ctx.header(Scope::Beresp, "set-cookie", "s=1");
    let mut ctx = ctx
        .to_backend()
        .var(Var::BerespTtl, Value::Duration(120.0))
        .var(Var::BerespUncacheable, Value::Bool(false));
    p.run(Sub::BackendResponse, &mut ctx);
    assert_eq!(
        ctx.get_var(Var::BerespUncacheable),
        Value::Bool(true),
        "the builtin makes it uncacheable"
    );
}

#[test]
fn cache_vary_hashes_the_named_cookies() {
    let text = vcl(
        "RewriteEngine on\nRewriteRule ^ - [E=Cache-Control:max-age=60,E=\"Cache-Vary:lang,currency\"]\n",
    );
    assert!(text.contains(r#"set req.http.X-Rewrite-Cache-Vary = req.http.X-Rewrite-Cache-Vary + "lang=" + cookie.get("lang") + ";" + "currency=" + cookie.get("currency") + ";";"#), "{text}");
    assert!(
        text.contains("hash_data(req.http.X-Rewrite-Cache-Vary);"),
        "{text}"
    );
    let p = program("RewriteEngine on\nRewriteRule ^ - [E=Cache-Control:max-age=60,E=Cache-Vary:lang]\n");
    let mut ctx = get("/").header(Scope::Req, "cookie", "lang=fr; session=9");
    assert_eq!(
        recv(&p, &mut ctx),
        Action::Lookup,
        "a request varying on its cookies is looked up"
    );
}

#[test]
fn cache_tag_and_cache_purge_use_the_surrogate_key_index() {
    let text = vcl("RewriteEngine on\nRewriteRule ^product/ - [E=Cache-Control:max-age=60,E=cache-tag:products]\nRewriteRule ^admin/save - [E=Cache-Purge:tag=products,E=Cache-Control:no-cache]\nRewriteRule ^admin/flush - [E=Cache-Purge:*]\nRewriteRule ^admin/home - [E=Cache-Purge:/index.php]\n");
    assert!(
        text.contains("set beresp.http.xkey = beresp.http.xkey + bereq.http.X-Rewrite-Cache-Tag;"),
        "{text}"
    );
    assert!(text.contains(r#"xkey.purge("products");"#), "{text}");
    assert!(text.contains(r#"std.ban("obj.status != 0");"#), "{text}");
    assert!(text.contains(r#"std.ban("req.url == /index.php");"#), "{text}");
    let p = program(
        "RewriteEngine on\nRewriteRule ^product/ - [E=Cache-Control:max-age=60,E=cache-tag:products]\n",
    );
    let mut ctx = get("/product/1");
    recv(&p, &mut ctx);
    let mut ctx = ctx.to_backend();
    p.run(Sub::BackendResponse, &mut ctx);
    assert_eq!(
        ctx.get_header(Scope::Beresp, "xkey").as_deref(),
        Some(" products")
    );
}

#[test]
fn redirects_answer_with_the_status_and_location() {
    let p = program(
        "RewriteEngine on\nRewriteRule ^old/(.*)$ /new/$1 [R=301,L]\nRewriteRule ^tmp$ /other [R,L]\n",
    );
    let mut ctx = get("/old/page?x=1");
    assert!(matches!(recv(&p, &mut ctx), Action::Synth { status: 301, .. }));
    assert_eq!(
        req_header(&ctx, "x-rewrite-location").as_deref(),
        Some("/new/page?x=1")
    );
    let mut synth = ctx.var(Var::RespStatus, Value::Int(301));
    p.run(Sub::Synth, &mut synth);
    assert_eq!(
        synth.get_header(Scope::Resp, "location").as_deref(),
        Some("/new/page?x=1")
    );
    assert!(matches!(
        recv(&p, &mut get("/tmp")),
        Action::Synth { status: 302, .. }
    ));
}

#[test]
fn force_https_and_force_www_redirect_to_the_host() {
    let p = program("RewriteEngine on\nRewriteCond %{HTTPS} off\nRewriteRule ^ https://%{HTTP_HOST}%{REQUEST_URI} [R=301,L]\n");
    let mut ctx = get("/a/b?c=1");
    assert!(matches!(recv(&p, &mut ctx), Action::Synth { status: 301, .. }));
    assert_eq!(
        req_header(&ctx, "x-rewrite-location").as_deref(),
        Some("https://example.com/a/b?c=1")
    );
    let p = program("RewriteEngine on\nRewriteCond %{HTTP_HOST} !^www\\. [NC]\nRewriteRule ^(.*)$ http://www.%{HTTP_HOST}/$1 [R=301,L]\n");
    let mut ctx = get("/x");
    recv(&p, &mut ctx);
    assert_eq!(
        req_header(&ctx, "x-rewrite-location").as_deref(),
        Some("http://www.example.com/x")
    );
}

#[test]
fn strip_utm_reads_the_conditions_groups() {
    let p = program("RewriteEngine on\nRewriteCond %{QUERY_STRING} ^(.*)utm_source=[^&]*&?(.*)$\nRewriteRule ^(.*)$ /$1?%1%2 [R=301,L]\n");
    let mut ctx = get("/p?a=1&utm_source=x&b=2");
    recv(&p, &mut ctx);
    assert_eq!(
        req_header(&ctx, "x-rewrite-location").as_deref(),
        Some("/p?a=1&b=2")
    );
}

#[test]
fn internal_rewrites_change_req_url_with_the_query_rules() {
    let p = program("RewriteEngine on\nRewriteBase /blog/\nRewriteRule ^post/([0-9]+)$ index.php?p=$1 [QSA,L]\nRewriteRule ^keep$ /kept [L]\nRewriteRule ^drop$ /dropped [QSD,L]\nRewriteRule ^empty$ /emptied? [L]\n");
    let cases = [
        ("/post/7", "/blog/index.php?p=7"),
        ("/post/7?utm=1", "/blog/index.php?p=7&utm=1"),
        ("/keep?a=1", "/kept?a=1"),
        ("/drop?a=1", "/dropped"),
        ("/empty?a=1", "/emptied"),
    ];
    for (from, to) in cases {
        let mut ctx = get(from);
        recv(&p, &mut ctx);
        assert_eq!(url(&ctx), to, "{from}");
    }
}

#[test]
fn ne_is_accepted_and_a_flag_name_is_case_insensitive() {
    let p = program("RewriteEngine on\nRewriteRule ^a$ /b\\%20c [ne,l]\n");
    let mut ctx = get("/a");
    recv(&p, &mut ctx);
    assert_eq!(url(&ctx), "/b%20c");
}

#[test]
fn forbidden_and_gone_answer_synthetic_errors() {
    let p = program("RewriteEngine on\nRewriteRule ^wp-config - [F]\nRewriteRule ^old - [G]\n");
    assert!(matches!(
        recv(&p, &mut get("/wp-config.php")),
        Action::Synth { status: 403, .. }
    ));
    assert!(matches!(
        recv(&p, &mut get("/old")),
        Action::Synth { status: 410, .. }
    ));
}

#[test]
fn rules_apply_only_with_the_engine_on() {
    let p = program("RewriteRule ^ - [E=Cache-Control:no-cache]\n");
    assert_eq!(recv(&p, &mut get("/")), Action::Lookup);
    let p = program("RewriteEngine on\nRewriteRule ^ - [E=Cache-Control:no-cache]\nRewriteEngine off\n");
    assert_eq!(
        recv(&p, &mut get("/")),
        Action::Lookup,
        "the last RewriteEngine decides"
    );
}

#[test]
fn litespeed_and_mod_rewrite_blocks_are_read() {
    let p = program("<IfModule LiteSpeed>\nCacheLookup on\n</IfModule>\n<IfModule mod_rewrite.c>\nRewriteEngine on\nRewriteRule ^ - [E=Cache-Control:no-cache]\n</IfModule>\n<IfModule !mod_rewrite.c>\nRedirect 301 / /elsewhere\n</IfModule>\n");
    assert_eq!(recv(&p, &mut get("/")), Action::Pass);
}

#[test]
fn the_cache_switches_become_vcl() {
    insta::assert_snapshot!(vcl(
        "CacheLookup on\nexpireInSeconds 300\nmaxStaleAge 30\nqsCache off\nreqCookieCache on\nrespCookieCache on\nignoreReqCacheCtrl off\nignoreRespCacheCtrl on\n"
    ));
}

#[test]
fn cache_lookup_off_and_enable_cache_off_pass() {
    let p = program("CacheLookup off\n");
    assert_eq!(recv(&p, &mut get("/")), Action::Pass);
    let p = program("enableCache off\nRewriteEngine on\nRewriteRule ^cached - [E=Cache-Control:max-age=5]\n");
    assert_eq!(recv(&p, &mut get("/other")), Action::Pass);
    assert_eq!(recv(&p, &mut get("/cached")), Action::Lookup);
    let p = program("qsCache off\n");
    assert_eq!(recv(&p, &mut get("/a?b")), Action::Pass);
    assert_eq!(recv(&p, &mut get("/a")), Action::Lookup);
}

#[test]
fn a_full_site_file_becomes_readable_vcl() {
    insta::assert_snapshot!(vcl(include_str!("../../../examples/site.htaccess")));
}

#[test]
fn what_edgecache_does_not_read_is_reported_and_the_rest_still_checked() {
    insta::assert_snapshot!(diagnostics(
        "RewriteEngine on\n\
         RewriteMap lower int:tolower\n\
         RewriteCond %{REQUEST_FILENAME} !-f\n\
         RewriteRule ^(.*)$ index.php [L]\n\
         RewriteRule ^api/(.*)$ http://backend/$1 [P]\n\
         <IfModule mod_headers.c>\n\
         Header set X-Frame-Options DENY\n\
         </IfModule>\n\
         php_value upload_max_filesize 64M\n\
         RewriteCond %{THE_REQUEST} ^GET\n\
         RewriteRule ^ - [E=Cache-Control:max-age=forever]\n\
         RewriteRule ^(unclosed - [L]\n\
         RewriteRule ^x - [QQ]\n"
    ));
}

#[test]
fn syntax_errors_are_reported_at_their_line() {
    insta::assert_snapshot!(diagnostics("RewriteEngine on\nRewriteCond %{HTTP_HOST} \"www\n"));
    insta::assert_snapshot!(diagnostics(
        "RewriteEngine maybe\nRewriteRule ^a\n<IfModule LiteSpeed>\nRewriteCond %{HTTP_HOST} ^a\n"
    ));
}

#[test]
fn other_environment_variables_are_warnings() {
    let mut sm = SourceMap::new();
    let text = "RewriteEngine on\nRewriteRule .* - [E=HTTP_AUTHORIZATION:%{HTTP:Authorization}]\n";
    let id = sm.add(NAME, text);
    let mut sink = Sink::default();
    assert!(to_vcl(id, sm.get(id), &mut sink).is_some());
    let rendered = Diagnostics::new(Arc::new(sm), sink.items).render();
    assert!(
        rendered.contains("`E=HTTP_AUTHORIZATION` sets a variable for the origin's scripts"),
        "{rendered}"
    );
}
