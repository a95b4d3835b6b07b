use super::*;
use crate::testing::TestContext;
use crate::{load_str, Sub, Var};

const C: BackendId = BackendId::new(2);

/// Backends `a`, `b`, `c` (0, 1, 2), shard director `vd` configured by `init`, and `vcl_recv`
/// setting the hint to `pick`.
fn program(init: &str, pick: &str) -> Program {
    let src = format!(
        "vcl 4.1;\nimport directors;\n\
         backend a {{ .host = \"10.0.0.1\"; }}\n\
         backend b {{ .host = \"10.0.0.2\"; }}\n\
         backend c {{ .host = \"10.0.0.3\"; }}\n\
         sub vcl_init {{ new vd = directors.shard(); {init} }}\n\
         sub vcl_recv {{ set req.backend_hint = {pick}; }}\n"
    );
    load_str("shard.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()))
}

const ABC: &str = "vd.add_backend(a); vd.add_backend(b); vd.add_backend(c); vd.reconfigure();";

fn hint(p: &Program, ctx: &mut TestContext) -> Option<BackendId> {
    p.run(Sub::Recv, ctx);
    match ctx.get_var(Var::ReqBackendHint) {
        Value::Backend(b) => b,
        other => panic!("no backend hint: {other:?}"),
    }
}

/// The backend the request goes to: the hint, or what the director it stayed picks then.
fn pick_for(p: &Program, url: &str, sick: &[BackendId]) -> Option<BackendId> {
    let mut ctx = TestContext::request("GET", url);
    for b in sick {
        ctx.set_healthy(*b, false);
    }
    let picked = hint(p, &mut ctx)?;
    if p.is_director(picked) {
        return p.resolve_backend(picked, &ctx);
    }
    Some(picked)
}

/// The members of the ring in the order the walk for `key` meets them.
fn order(p: &Program, key: u32) -> Vec<BackendId> {
    let shard = p.directors[0].shard.as_deref().expect("a shard director");
    let mut walk = Walk::new(shard, key);
    std::iter::from_fn(|| walk.next(0, false, &|_| true))
        .map(|m| shard.members[m].backend)
        .collect()
}

#[test]
fn by_url_picks_the_owner_of_the_first_point_after_the_url_hash() {
    let p = program(ABC, "vd.backend(by=URL)");
    let shard = p.directors[0].shard.as_deref().unwrap();
    for i in 0..50 {
        let url = format!("/item/{i}");
        let key = hash32(&[&url]);
        let owner = shard.members[shard.ring[shard.start(key)].member].backend;
        assert_eq!(pick_for(&p, &url, &[]), Some(owner), "{url}");
        // HASH on the client side hashes the URL too, as Varnish's does.
        let by_hash = program(ABC, "vd.backend()");
        assert_eq!(pick_for(&by_hash, &url, &[]), Some(owner), "{url}");
    }
}

#[test]
fn a_backend_leaving_moves_only_its_share() {
    let with_c = program(ABC, "vd.backend(by=URL)");
    let without_c = program(
        "vd.add_backend(a); vd.add_backend(b); vd.add_backend(c); vd.reconfigure(); vd.remove_backend(c);",
        "vd.backend(by=URL)",
    );
    let mut on_c = 0;
    for i in 0..600 {
        let url = format!("/u/{i}");
        let before = pick_for(&with_c, &url, &[]);
        let after = pick_for(&without_c, &url, &[]);
        if before == Some(C) {
            on_c += 1;
            assert_ne!(after, Some(C));
        } else {
            assert_eq!(after, before, "{url} moved though its backend stayed");
        }
    }
    assert!((100..=300).contains(&on_c), "c held about a third: {on_c}");
}

#[test]
fn alt_picks_the_next_distinct_backend_on_the_ring() {
    for key in [0u32, 12345, 0x8000_0000, u32::MAX] {
        let p = program(ABC, &format!("vd.backend(by=KEY, key={key})"));
        let order = order(&p, key);
        assert_eq!(order.len(), 3, "every member once");
        for (alt, want) in order.iter().enumerate() {
            let p = program(ABC, &format!("vd.backend(by=KEY, key={key}, alt={alt})"));
            assert_eq!(pick_for(&p, "/", &[]), Some(*want), "key {key} alt {alt}");
        }
        // An alt past the members is the last one.
        let p = program(ABC, &format!("vd.backend(by=KEY, key={key}, alt=7)"));
        assert_eq!(pick_for(&p, "/", &[]), Some(order[2]));
    }
}

#[test]
fn unhealthy_backends_are_skipped_per_healthy() {
    let key = 4242u32;
    let p = program(ABC, "vd.backend(by=KEY, key=4242)");
    let [first, second, third] = <[BackendId; 3]>::try_from(order(&p, key)).unwrap();
    // CHOSEN: the next healthy one.
    assert_eq!(pick_for(&p, "/", &[first]), Some(second));
    assert_eq!(pick_for(&p, "/", &[first, second]), Some(third));
    assert_eq!(
        pick_for(&p, "/", &[first, second, third]),
        None,
        "none healthy: no backend (the director stays the hint)"
    );
    let mut ctx = TestContext::request("GET", "/");
    for b in [first, second, third] {
        ctx.set_healthy(b, false);
    }
    assert!(
        p.is_director(hint(&p, &mut ctx).unwrap()),
        "not the default backend"
    );
    // IGNORE: health does not matter.
    let p = program(ABC, "vd.backend(by=KEY, key=4242, healthy=IGNORE)");
    assert_eq!(pick_for(&p, "/", &[first]), Some(first));
    // alt=1, CHOSEN: the skipped one's health does not matter, the chosen one's does.
    let p = program(ABC, "vd.backend(by=KEY, key=4242, alt=1)");
    assert_eq!(pick_for(&p, "/", &[first]), Some(second));
    assert_eq!(pick_for(&p, "/", &[second]), Some(third));
    // alt=1, ALL: only healthy ones count, so with the first sick the second healthy is third.
    let p = program(ABC, "vd.backend(by=KEY, key=4242, alt=1, healthy=ALL)");
    assert_eq!(pick_for(&p, "/", &[first]), Some(third));
    assert_eq!(pick_for(&p, "/", &[]), Some(second));
    // When the ring runs out after the skipped ones, the last healthy one skipped (none here,
    // as Varnish's `sharddir_pick_be` has it).
    assert_eq!(pick_for(&p, "/", &[first, third]), None);
    let p = program(ABC, "vd.backend(by=KEY, key=4242, alt=2, healthy=ALL)");
    assert_eq!(pick_for(&p, "/", &[second]), Some(first));
}

#[test]
fn warmup_sends_its_share_to_the_next_backend() {
    let p = program(&format!("{ABC} vd.set_warmup(0.5);"), "vd.backend(by=KEY, key=7)");
    let [first, second, _] = <[BackendId; 3]>::try_from(order(&p, 7)).unwrap();
    let mut ctx = TestContext::request("GET", "/");
    ctx.random = Some(0.25);
    assert_eq!(
        hint(&p, &mut ctx),
        Some(second),
        "a roll under the warmup goes to the next"
    );
    ctx.random = Some(0.75);
    assert_eq!(hint(&p, &mut ctx), Some(first));
    // warmup=0 on the call turns it off.
    let p = program(
        &format!("{ABC} vd.set_warmup(0.5);"),
        "vd.backend(by=KEY, key=7, warmup=0.0)",
    );
    let mut ctx = TestContext::request("GET", "/");
    ctx.random = Some(0.25);
    assert_eq!(hint(&p, &mut ctx), Some(first));
}

#[test]
fn key_is_the_sha256_hash_varnish_uses_and_by_blob_reads_four_bytes() {
    let p = program(ABC, "vd.backend(by=KEY, key=vd.key(req.url))");
    let mut ctx = TestContext::request("GET", "/x");
    let via_key = hint(&p, &mut ctx);
    let by_url = program(ABC, "vd.backend(by=URL)");
    assert_eq!(pick_for(&by_url, "/x", &[]), via_key);
    // SHA-256("") ends in ...78 52 b8 55: read little-endian.
    assert_eq!(hash32(&[""]), 0x55b8_5278);
    assert_eq!(blob_key("0102030405"), 0x0102_0304);
    assert_eq!(blob_key("0102"), 0x0102);
    assert_eq!(blob_key(""), 0);
}

#[test]
fn lazy_picks_when_resolved_with_the_arguments_it_was_given() {
    let p = program(ABC, "vd.backend(resolve=LAZY)");
    let mut ctx = TestContext::request("GET", "/lazy");
    let lazy = hint(&p, &mut ctx).unwrap();
    assert!(p.is_director(lazy), "the director itself");
    let now = program(ABC, "vd.backend()");
    let want = pick_for(&now, "/lazy", &[]);
    assert_eq!(p.resolve_backend(lazy, &TestContext::new()), want);
    let args = PickArgs {
        key: 0xdead_beef,
        alt: 2,
        warmup: 0.25,
        rampup: false,
        healthy: ShardHealthy::All,
        param: Some(14),
        given: 0x1f,
    };
    assert_eq!(PickArgs::unpack(args.pack()), args);
    let default = PickArgs {
        warmup: -1.0,
        param: None,
        given: 0,
        ..args
    };
    assert_eq!(PickArgs::unpack(default.pack()), default);
}

#[test]
fn configuration_mistakes_are_reported() {
    let err = |init: &str, pick: &str| {
        let src = format!(
            "vcl 4.1;\nimport directors;\nbackend a {{ .host = \"10.0.0.1\"; }}\n\
             sub vcl_init {{ new vd = directors.shard(); {init} }}\n\
             sub vcl_recv {{ set req.backend_hint = {pick}; }}\n"
        );
        match load_str("shard.vcl", &src) {
            Ok(_) => String::new(),
            Err(d) => d.render(),
        }
    };
    assert_eq!(
        err(
            "vd.add_backend(a, weight=2.0, ident=\"a1\", rampup=10s);",
            "vd.backend()"
        ),
        ""
    );
    assert!(err("vd.add_backend(a);", "vd.backend(by=KEY)").contains("needs the `key` argument"));
    assert!(err("vd.add_backend(a);", "vd.backend(by=URL, key=1)").contains("do not go with `by=URL`"));
    assert!(err("vd.add_backend(a);", "vd.backend(by=NAME)").contains("takes one of HASH, URL, KEY, BLOB"));
    assert!(err("vd.reconfigure(0);", "vd.backend()").contains("`replicas` must be a positive number"));
    assert!(err("vd.remove_backend();", "vd.backend()").contains("needs a backend or an ident"));
    assert!(err("vd.rebuild();", "vd.backend()").contains("a shard director has no method `rebuild`"));
    assert!(
        err(
            "vd.add_backend(a);",
            "vd.backend(param=blob.decode(encoded=\"x\"))"
        )
        .contains("needs `import blob;`")
            || err(
                "vd.add_backend(a);",
                "vd.backend(param=blob.decode(encoded=\"x\"))"
            )
            .contains("not supported")
    );
    let layered = err(
        "vd.add_backend(a); new fb = directors.fallback(); fb.add_backend(vd.backend());",
        "fb.backend()",
    );
    assert!(
        layered.contains("a `shard` director cannot be a member"),
        "{layered}"
    );
}

/// `vd` over a, b, c with parameter set `p` made first and `init` after it; `vcl_recv` sets
/// the hint to `pick`, `vcl_backend_fetch` runs `fetch`.
fn with_params(init: &str, pick: &str, fetch: &str) -> Program {
    let src = format!(
        "vcl 4.1;\nimport directors;\n\
         backend a {{ .host = \"10.0.0.1\"; }}\n\
         backend b {{ .host = \"10.0.0.2\"; }}\n\
         backend c {{ .host = \"10.0.0.3\"; }}\n\
         sub vcl_init {{ new p = directors.shard_param(); new vd = directors.shard(); {ABC} {init} }}\n\
         sub vcl_recv {{ set req.backend_hint = {pick}; }}\n\
         sub vcl_backend_fetch {{ {fetch} }}\n"
    );
    load_str("param.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()))
}

#[test]
fn an_associated_parameter_set_gives_what_backend_is_not_given() {
    // vmod_directors.vcc: `vd.associate(p.use())`; arguments of `.backend()` win.
    let p = with_params(
        "p.set(by=KEY, key=1234, alt=1); vd.associate(p.use());",
        "vd.backend()",
        "",
    );
    let same = program(ABC, "vd.backend(by=KEY, key=1234, alt=1)");
    assert_eq!(pick_for(&p, "/x", &[]), pick_for(&same, "/x", &[]));
    assert_eq!(pick_for(&p, "/x", &[]), Some(order(&p, 1234)[1]));
    let given = with_params(
        "p.set(by=KEY, key=1234, alt=1); vd.associate(p.use());",
        "vd.backend(alt=0)",
        "",
    );
    assert_eq!(
        pick_for(&given, "/x", &[]),
        Some(order(&given, 1234)[0]),
        "alt=0 given wins"
    );
    // `associate()` clears; `p.clear()` in vcl_init resets the set.
    let cleared = with_params(
        "p.set(by=KEY, key=1234); vd.associate(p.use()); vd.associate();",
        "vd.backend()",
        "",
    );
    assert_eq!(
        pick_for(&cleared, "/x", &[]),
        pick_for(&program(ABC, "vd.backend()"), "/x", &[])
    );
    let reset = with_params(
        "p.set(by=KEY, key=1234); p.clear(); vd.associate(p.use());",
        "vd.backend()",
        "",
    );
    assert_eq!(
        pick_for(&reset, "/x", &[]),
        pick_for(&program(ABC, "vd.backend()"), "/x", &[])
    );
}

#[test]
fn a_backend_side_set_moves_a_lazy_pick_of_that_request() {
    // vmod_directors.vcc's example: the director is chosen on the client side, the set changed
    // on the backend side ("implement retries on alternative backends").
    let p = with_params(
        "vd.associate(p.use());",
        "vd.backend(resolve=LAZY)",
        "p.set(alt=bereq.retries, by=URL);",
    );
    let key = hash32(&["/item"]);
    let mut ctx = TestContext::request("GET", "/item");
    let lazy = hint(&p, &mut ctx).expect("the director");
    assert!(p.is_director(lazy));
    assert_eq!(p.resolve_backend(lazy, &ctx), Some(order(&p, key)[0]));
    Context::set(&mut ctx, Var::BereqRetries, Value::Int(1));
    p.run(Sub::BackendFetch, &mut ctx);
    assert_eq!(
        p.resolve_backend(lazy, &ctx),
        Some(order(&p, key)[1]),
        "the retry goes to the next one"
    );
    assert_eq!(
        p.resolve_backend(lazy, &TestContext::new()),
        Some(order(&p, key)[0]),
        "only that request"
    );
}

#[test]
fn parameter_set_getters_and_where_a_set_may_be_used() {
    let src = |recv: &str| {
        format!(
            "vcl 4.1;\nimport directors;\nbackend a {{ .host = \"10.0.0.1\"; }}\n\
             sub vcl_init {{ new p = directors.shard_param(); p.set(by=KEY, key=7, healthy=ALL); new vd = directors.shard(); vd.add_backend(a); }}\n\
             sub vcl_backend_fetch {{ set bereq.http.X = p.get_by() + \" \" + p.get_key() + \" \" + p.get_alt() + \" \" + p.get_healthy() + \" \" + p.get_rampup(); }}\n\
             {recv}\n"
        )
    };
    let p = load_str("g.vcl", &src("")).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut ctx = TestContext::request("GET", "/");
    p.run(Sub::BackendFetch, &mut ctx);
    assert_eq!(
        ctx.get_header(crate::Scope::Bereq, "x").as_deref(),
        Some("KEY 7 0 ALL true")
    );
    let err = |recv: &str| {
        load_str("g.vcl", &src(recv))
            .err()
            .map(|d| d.render())
            .unwrap_or_default()
    };
    // "Parameter sets cannot be used in client context except for vcl_pipe".
    let e = err("sub vcl_recv { p.set(alt=1); }");
    assert!(
        e.contains("`p.set` is not available in `vcl_recv`") && e.contains("g.vcl:6:"),
        "{e}"
    );
    assert!(
        err("sub vcl_recv { set req.backend_hint = vd.backend(param=p.use()); }")
            .contains("`p.use` is not available in `vcl_recv`")
    );
    assert!(err("sub vcl_pipe { p.set(alt=1); }").is_empty());
    let e = err("sub vcl_backend_fetch { set bereq.backend = vd.backend(param=vd.backend()); }");
    assert!(e.contains("E020") && e.contains("BLOB"), "{e}");
    let e = err("sub vcl_backend_fetch { set bereq.http.y = p; }");
    assert!(
        e.contains("is a shard parameter set, not a value") && e.contains("hint:"),
        "{e}"
    );
}
