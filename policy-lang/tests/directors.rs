//! Directors: `d.backend()` is the director itself; `Program::resolve_backend`
//! picks a member at fetch time (round_robin, fallback, random, hash,
//! least_connections), skipping sick members.

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Action, BackendId, Program, Scope, Sub, Value, Var};

/// Backends `a`, `b`, `c` (ids 0, 1, 2), director `d` of `kind` over `members`
/// (`add_backend` argument lists), and `vcl_recv` setting the hint to `pick`.
fn program(kind: &str, members: &[&str], pick: &str) -> Program {
    let adds: String = members.iter().map(|m| format!("d.add_backend({m}); ")).collect();
    let src = format!(
        "vcl 4.1;\nimport std;\nimport directors;\n\
         backend a {{ .host = \"10.0.0.1\"; }}\n\
         backend b {{ .host = \"10.0.0.2\"; }}\n\
         backend c {{ .host = \"10.0.0.3\"; }}\n\
         sub vcl_init {{ new d = directors.{kind}(); {adds}}}\n\
         sub vcl_recv {{ set req.backend_hint = {pick}; }}\n"
    );
    load_str("directors.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()))
}

const A: BackendId = BackendId::new(0);
const B: BackendId = BackendId::new(1);
const C: BackendId = BackendId::new(2);

/// `req.backend_hint` after `vcl_recv` for `url`.
fn hint(p: &Program, url: &str) -> BackendId {
    let mut ctx = TestContext::request("GET", url);
    p.run(Sub::Recv, &mut ctx);
    match ctx.get_var(Var::ReqBackendHint) {
        Value::Backend(Some(b)) => b,
        other => panic!("no backend hint: {other:?}"),
    }
}

#[test]
fn a_director_call_evaluates_to_the_director() {
    let p = program("round_robin", &["a", "b"], "d.backend()");
    let d = hint(&p, "/");
    assert!(p.is_director(d));
    assert!(!p.is_director(A));
    assert_eq!(d.index(), p.backends().len());
    assert_eq!(p.backend_name(d), "d");
    assert_eq!(p.backend_name(A), "a");
    assert_eq!(p.backend_name(BackendId::new(99)), "");
    // Evaluating again gives the same value: nothing was picked yet.
    assert_eq!(hint(&p, "/"), d);
}

#[test]
fn resolve_backend_returns_a_plain_backend_even_when_sick() {
    let p = program("round_robin", &["a"], "b");
    let mut ctx = TestContext::new();
    ctx.set_healthy(B, false);
    assert_eq!(hint(&p, "/"), B);
    assert_eq!(p.resolve_backend(B, &ctx), Some(B));
    assert_eq!(p.resolve_backend(BackendId::new(99), &ctx), None);
}

#[test]
fn a_director_converts_to_its_name() {
    let p = load_str(
        "n.vcl",
        "vcl 4.1;\nimport directors;\nbackend a { .host = \"h\"; }\n\
         sub vcl_init { new cluster = directors.hash(); cluster.add_backend(a); }\n\
         sub vcl_recv {\n\
           set req.backend_hint = cluster.backend(req.url);\n\
           set req.http.X-Backend = req.backend_hint;\n\
           if (req.backend_hint == cluster.backend(\"other key\")) { set req.http.X-Same = \"1\"; }\n\
           if (req.backend_hint != a) { set req.http.X-Not-A = \"1\"; }\n\
         }\n",
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    let mut ctx = TestContext::request("GET", "/x");
    p.run(Sub::Recv, &mut ctx);
    assert_eq!(
        ctx.get_header(Scope::Req, "x-backend").as_deref(),
        Some("cluster")
    );
    // A director compares as itself, whatever the key.
    assert_eq!(ctx.get_header(Scope::Req, "x-same").as_deref(), Some("1"));
    assert_eq!(ctx.get_header(Scope::Req, "x-not-a").as_deref(), Some("1"));
}

#[test]
fn round_robin_spreads_evenly_and_skips_a_sick_member() {
    let p = program("round_robin", &["a", "b", "c"], "d.backend()");
    let d = hint(&p, "/");
    let mut ctx = TestContext::new();
    let mut counts = [0; 3];
    for _ in 0..300 {
        counts[p.resolve_backend(d, &ctx).unwrap().index()] += 1;
    }
    assert_eq!(counts, [100, 100, 100]);

    ctx.set_healthy(B, false);
    let mut counts = [0; 3];
    let mut picks = Vec::new();
    for _ in 0..300 {
        let b = p.resolve_backend(d, &ctx).unwrap();
        counts[b.index()] += 1;
        picks.push(b);
    }
    assert_eq!(counts, [150, 0, 150]);
    // Alternating, not a, c, c.
    assert!(picks.windows(2).all(|w| w[0] != w[1]), "{picks:?}");

    ctx.set_healthy(A, false);
    ctx.set_healthy(C, false);
    assert_eq!(p.resolve_backend(d, &ctx), None);
}

#[test]
fn fallback_takes_the_first_healthy_member() {
    let p = program("fallback", &["a", "b", "c"], "d.backend()");
    let d = hint(&p, "/");
    let mut ctx = TestContext::new();
    assert_eq!(p.resolve_backend(d, &ctx), Some(A));
    ctx.set_healthy(A, false);
    assert_eq!(p.resolve_backend(d, &ctx), Some(B));
    assert_eq!(p.resolve_backend(d, &ctx), Some(B));
    ctx.set_healthy(B, false);
    assert_eq!(p.resolve_backend(d, &ctx), Some(C));
    ctx.set_healthy(A, true);
    assert_eq!(p.resolve_backend(d, &ctx), Some(A));
}

#[test]
fn random_is_weighted_and_skips_sick_members() {
    let p = program("random", &["a, 1.0", "b, 3.0", "c, 0"], "d.backend()");
    let d = hint(&p, "/");
    let mut ctx = TestContext::new();
    let mut counts = [0; 3];
    for i in 0..1000 {
        ctx.random = Some(i as f64 / 1000.0);
        counts[p.resolve_backend(d, &ctx).unwrap().index()] += 1;
    }
    // Weight 0 is never picked.
    assert_eq!(counts, [250, 750, 0]);
    ctx.set_healthy(B, false);
    for i in 0..100 {
        ctx.random = Some(i as f64 / 100.0);
        assert_eq!(p.resolve_backend(d, &ctx), Some(A));
    }
}

#[test]
fn least_connections_picks_the_least_loaded_and_rotates_among_equals() {
    let p = program("least_connections", &["a", "b", "c"], "d.backend()");
    let d = hint(&p, "/");
    let mut ctx = TestContext::new();
    ctx.set_in_flight(A, 3);
    ctx.set_in_flight(B, 1);
    ctx.set_in_flight(C, 2);
    for _ in 0..10 {
        assert_eq!(p.resolve_backend(d, &ctx), Some(B));
    }
    // B and C equal: they take turns; A (more loaded) never.
    ctx.set_in_flight(C, 1);
    let picks: Vec<_> = (0..10).map(|_| p.resolve_backend(d, &ctx).unwrap()).collect();
    assert_eq!(picks.iter().filter(|b| **b == B).count(), 5, "{picks:?}");
    assert_eq!(picks.iter().filter(|b| **b == C).count(), 5, "{picks:?}");
    // All equal: every member in turn.
    ctx.set_in_flight(A, 1);
    let mut counts = [0; 3];
    for _ in 0..30 {
        counts[p.resolve_backend(d, &ctx).unwrap().index()] += 1;
    }
    assert_eq!(counts, [10, 10, 10]);
    // The least loaded is sick: the next least loaded.
    ctx.set_in_flight(A, 0);
    ctx.set_healthy(A, false);
    ctx.set_in_flight(C, 5);
    assert_eq!(p.resolve_backend(d, &ctx), Some(B));
}

#[test]
fn least_connections_weights_divide_the_load() {
    let p = program("least_connections", &["a, 4", "b"], "d.backend()");
    let d = hint(&p, "/");
    let mut ctx = TestContext::new();
    ctx.set_in_flight(A, 3); // 3/4 per unit of weight
    ctx.set_in_flight(B, 1); // 1/1
    assert_eq!(p.resolve_backend(d, &ctx), Some(A));
}

fn owners(p: &Program, ctx: &TestContext, keys: usize) -> Vec<BackendId> {
    (0..keys)
        .map(|i| {
            let d = hint(p, &format!("/object/{i}"));
            p.resolve_backend(d, ctx).expect("a healthy member")
        })
        .collect()
}

#[test]
fn hash_maps_each_key_to_one_member_consistently() {
    let p = program("hash", &["a", "b", "c"], "d.backend(req.url)");
    let ctx = TestContext::new();
    let first = owners(&p, &ctx, 3000);
    assert_eq!(owners(&p, &ctx, 3000), first);
    let mut counts = [0; 3];
    for b in &first {
        counts[b.index()] += 1;
    }
    for n in counts {
        assert!((800..=1200).contains(&n), "uneven spread: {counts:?}");
    }
    // The same key gives the same member in another program with the same members.
    let again = program("hash", &["a", "b", "c"], "d.backend(req.url)");
    assert_eq!(owners(&again, &ctx, 3000), first);
}

/// Only the keys of the member that went away move, about a third of them.
fn assert_minimal_remapping(before: &[BackendId], after: &[BackendId], gone: BackendId) {
    let mut moved = 0;
    for (i, (x, y)) in before.iter().zip(after).enumerate() {
        if *x == gone {
            assert_ne!(*y, gone, "key {i} still on the missing member");
            moved += 1;
        } else {
            assert_eq!(x, y, "key {i} moved from a member that stayed");
        }
    }
    let fraction = moved as f64 / before.len() as f64;
    assert!((0.25..=0.42).contains(&fraction), "moved {fraction}");
}

#[test]
fn hash_moves_only_the_keys_of_a_sick_member() {
    let p = program("hash", &["a", "b", "c"], "d.backend(req.url)");
    let mut ctx = TestContext::new();
    let before = owners(&p, &ctx, 3000);
    ctx.set_healthy(B, false);
    let after = owners(&p, &ctx, 3000);
    assert_minimal_remapping(&before, &after, B);
    // Back to health: every key goes back.
    ctx.set_healthy(B, true);
    assert_eq!(owners(&p, &ctx, 3000), before);
}

#[test]
fn hash_moves_only_the_keys_of_a_removed_member() {
    let ctx = TestContext::new();
    let before = owners(
        &program("hash", &["a", "b", "c"], "d.backend(req.url)"),
        &ctx,
        3000,
    );
    let after = owners(&program("hash", &["a", "c"], "d.backend(req.url)"), &ctx, 3000);
    assert_minimal_remapping(&before, &after, B);
    // Order of add_backend does not matter either.
    let reordered = owners(
        &program("hash", &["c", "a", "b"], "d.backend(req.url)"),
        &ctx,
        3000,
    );
    assert_eq!(reordered, before);
}

#[test]
fn hash_weights_shift_the_share() {
    let p = program("hash", &["a, 2.0", "b", "c, 1.0"], "d.backend(req.url)");
    let ctx = TestContext::new();
    let mut counts = [0; 3];
    for b in owners(&p, &ctx, 4000) {
        counts[b.index()] += 1;
    }
    // Expected 2000 / 1000 / 1000.
    assert!((1800..=2200).contains(&counts[0]), "{counts:?}");
    assert!((800..=1200).contains(&counts[1]), "{counts:?}");
}

#[test]
fn std_healthy_on_a_director_is_any_member_healthy() {
    let p = load_str(
        "h.vcl",
        "vcl 4.1;\nimport std;\nimport directors;\n\
         backend a { .host = \"h\"; }\nbackend b { .host = \"h\"; }\n\
         sub vcl_init { new d = directors.fallback(); d.add_backend(a); d.add_backend(b);\n\
                        new empty = directors.round_robin(); }\n\
         sub vcl_recv {\n\
           if (std.healthy(d.backend())) { set req.http.X-D = \"up\"; }\n\
           if (std.healthy(empty.backend())) { set req.http.X-Empty = \"up\"; }\n\
           if (std.healthy(a)) { set req.http.X-A = \"up\"; }\n\
         }\n",
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    let run = |ctx: &mut TestContext| {
        p.run(Sub::Recv, ctx);
        (
            ctx.get_header(Scope::Req, "x-d"),
            ctx.get_header(Scope::Req, "x-empty"),
            ctx.get_header(Scope::Req, "x-a"),
        )
    };
    let up = Some("up".to_string());
    let mut ctx = TestContext::request("GET", "/");
    ctx.set_healthy(A, false);
    assert_eq!(run(&mut ctx), (up.clone(), None, None));
    let mut ctx = TestContext::request("GET", "/");
    ctx.set_healthy(A, false);
    ctx.set_healthy(B, false);
    assert_eq!(run(&mut ctx), (None, None, None));
    // An empty director resolves to nothing.
    let empty = BackendId::new(3); // the second director, after 2 backends
    assert_eq!(p.backend_name(empty), "empty");
    assert_eq!(p.resolve_backend(empty, &TestContext::new()), None);
}

fn errors(src: &str) -> String {
    load_str("e.vcl", src)
        .map(|_| String::new())
        .unwrap_or_else(|d| d.render())
}

#[test]
fn checker_accepts_least_connections_and_names_the_supported_kinds() {
    let base = "vcl 4.1;\nimport directors;\nbackend a { .host = \"h\"; }\n";
    let ok = format!(
        "{base}sub vcl_init {{ new lc = directors.least_connections(); lc.add_backend(a); lc.add_backend(a, 2); }}\n\
         sub vcl_recv {{ set req.backend_hint = lc.backend(); }}"
    );
    assert_eq!(errors(&ok), "");

    let r = errors(&format!(
        "{base}sub vcl_init {{ new x = directors.least_connection(); }}"
    ));
    assert!(
        r.contains("`new` with `directors.least_connection` is not supported"),
        "{r}"
    );
    assert!(r.contains("did you mean `directors.least_connections`?"), "{r}");
    assert!(
        r.contains("`directors.round_robin()`, `directors.fallback()`, `directors.random()`, `directors.hash()`, `directors.least_connections()`, `directors.shard()`"),
        "{r}"
    );
    let r = errors(&format!("{base}sub vcl_init {{ new x = directors.vslp(); }}"));
    assert!(r.contains("`directors.shard()`"), "{r}");

    // A director is added by its value, `x.backend()`, not by its name.
    let r = errors(&format!(
        "{base}sub vcl_init {{ new x = directors.round_robin(); new y = directors.fallback(); y.add_backend(x); }}"
    ));
    assert!(r.contains("director `x` is not a backend"), "{r}");
    // least_connections().backend() takes no key.
    let r = errors(&format!(
        "{base}sub vcl_init {{ new x = directors.least_connections(); }}\nsub vcl_recv {{ set req.backend_hint = x.backend(req.url); }}"
    ));
    assert!(r.contains("wrong number of arguments"), "{r}");
}

/// Backends `a`, `b`, `c`; `fb` = fallback(`rr` = round_robin(a, b), c), or least_connections
/// over the same members; `vcl_recv` hints `fb`.
fn nested(outer: &str) -> Program {
    load_str(
        "nested.vcl",
        &format!(
            "vcl 4.1;\nimport std;\nimport directors;\n\
             backend a {{ .host = \"10.0.0.1\"; }}\n\
             backend b {{ .host = \"10.0.0.2\"; }}\n\
             backend c {{ .host = \"10.0.0.3\"; }}\n\
             sub vcl_init {{\n\
               new rr = directors.round_robin(); rr.add_backend(a); rr.add_backend(b);\n\
               new fb = directors.{outer}(); fb.add_backend(rr.backend()); fb.add_backend(c);\n\
             }}\n\
             sub vcl_recv {{ set req.backend_hint = fb.backend(); }}\n"
        ),
    )
    .unwrap_or_else(|d| panic!("{}", d.render()))
}

#[test]
fn a_director_member_picks_in_turn() {
    let p = nested("fallback");
    let fb = hint(&p, "/");
    let mut ctx = TestContext::new();
    let picks: Vec<_> = (0..4).map(|_| p.resolve_backend(fb, &ctx)).collect();
    assert_eq!(
        picks,
        [Some(A), Some(B), Some(A), Some(B)],
        "rr, the first member, is healthy"
    );

    ctx.set_healthy(A, false);
    assert_eq!(p.resolve_backend(fb, &ctx), Some(B), "rr skips its sick member");
    ctx.set_healthy(B, false);
    assert_eq!(
        p.resolve_backend(fb, &ctx),
        Some(C),
        "rr has no healthy member: fallback goes on to c"
    );
    ctx.set_healthy(C, false);
    assert_eq!(p.resolve_backend(fb, &ctx), None);
}

#[test]
fn a_director_member_carries_the_load_of_its_members() {
    let p = nested("least_connections");
    let lc = hint(&p, "/");
    let mut ctx = TestContext::new();
    ctx.set_in_flight(A, 2);
    ctx.set_in_flight(B, 2);
    ctx.set_in_flight(C, 3);
    assert_eq!(p.resolve_backend(lc, &ctx), Some(C), "rr holds 4 in flight, c 3");
    ctx.set_in_flight(C, 5);
    let pick = p.resolve_backend(lc, &ctx);
    assert!(pick == Some(A) || pick == Some(B), "{pick:?}");
}

#[test]
fn checker_refuses_director_cycles_and_hash_members() {
    let base = "vcl 4.1;\nimport directors;\nbackend a { .host = \"h\"; }\n";
    let r = errors(&format!(
        "{base}sub vcl_init {{ new x = directors.round_robin(); new y = directors.fallback();\n\
         x.add_backend(y.backend()); y.add_backend(x.backend()); }}"
    ));
    assert!(r.contains("director `x` would contain itself"), "{r}");
    assert!(r.contains("directors may nest, but not in a cycle"), "{r}");
    assert_eq!(
        r.matches("would contain itself").count(),
        1,
        "one report per cycle: {r}"
    );
    let r = errors(&format!(
        "{base}sub vcl_init {{ new x = directors.round_robin(); x.add_backend(x.backend()); }}"
    ));
    assert!(r.contains("director `x` would contain itself"), "{r}");

    let r = errors(&format!(
        "{base}sub vcl_init {{ new h = directors.hash(); h.add_backend(a); new y = directors.fallback();\n\
         y.add_backend(h.backend(\"k\")); }}"
    ));
    assert!(
        r.contains("a `hash` director cannot be a member of another director"),
        "{r}"
    );
}

#[test]
fn the_director_is_resolved_again_on_each_call() {
    // The value stays the director across restarts of the same request; each
    // resolution (a retry) picks anew.
    let p = program("round_robin", &["a", "b"], "d.backend()");
    let mut ctx = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Recv, &mut ctx), Action::Lookup);
    let Value::Backend(Some(d)) = ctx.get_var(Var::ReqBackendHint) else {
        panic!("no hint");
    };
    let first = p.resolve_backend(d, &ctx);
    let second = p.resolve_backend(d, &ctx);
    assert_ne!(first, second);
}
