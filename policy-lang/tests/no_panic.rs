//! Fuzz-style property tests: `load_str` never panics, whatever the input.
//! Seeds: arbitrary strings, VCL-ish token soup, and mutated example policies.

use proptest::prelude::*;

fn examples() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policies");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "vcl"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    v.push(policy_lang::BUILTIN_VCL.to_string());
    v
}

const TOKENS: &[&str] = &[
    "vcl 4.1;",
    "sub",
    "vcl_recv",
    "vcl_backend_response",
    "{",
    "}",
    "(",
    ")",
    ";",
    "if",
    "else",
    "elsif",
    "set",
    "unset",
    "return",
    "call",
    "hash",
    "pass",
    "synth",
    "deliver",
    "req.url",
    "req.http.X",
    "beresp.ttl",
    "client.ip",
    "~",
    "!~",
    "==",
    "!",
    "&&",
    "||",
    "+",
    "-",
    "=",
    "\"^/a\"",
    "\"(\"",
    "{\"x\"}",
    "10s",
    "1.5",
    "64KB",
    "true",
    "regsub",
    "std.log",
    "import std;",
    "backend b { .host = \"h\"; }",
    "acl a { \"1.2.3.4\"/8; }",
    ",",
    "hash_data",
    "ban",
    "new",
    "directors.round_robin()",
    "x.backend()",
    "/* c */",
    "# c\n",
    "\n",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|v| v.join(" "))
}

fn mutated_example() -> impl Strategy<Value = String> {
    let ex = examples();
    (
        0..ex.len(),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<char>()), 1..8),
    )
        .prop_map(move |(i, edits)| {
            let mut s: Vec<char> = ex[i].chars().collect();
            for (at, kind, c) in edits {
                if s.is_empty() {
                    break;
                }
                let at = at.index(s.len());
                match kind {
                    0 => {
                        s.remove(at);
                    }
                    1 => s.insert(at, c),
                    2 => s.truncate(at),
                    _ => {
                        let tok = ['{', '}', '(', ')', ';', '"', '~', '!', '.'][at % 9];
                        s.insert(at, tok);
                    }
                }
            }
            s.into_iter().collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_do_not_panic(s in "\\PC{0,300}") {
        let _ = policy_lang::load_str("fuzz.vcl", &s).map_err(|d| d.render());
    }

    #[test]
    fn token_soup_does_not_panic(s in token_soup()) {
        let _ = policy_lang::load_str("fuzz.vcl", &s).map_err(|d| d.render());
    }

    #[test]
    fn mutated_examples_do_not_panic(s in mutated_example()) {
        if let Err(d) = policy_lang::load_str("fuzz.vcl", &s) {
            let _ = d.render();
        }
    }

    #[test]
    fn ban_parser_does_not_panic(s in "\\PC{0,80}") {
        let _ = policy_lang::parse_ban(&s).map_err(|d| d.render());
    }
}

#[test]
fn deep_nesting_does_not_overflow() {
    let deep = format!(
        "sub vcl_recv {{ if ({}true{}) {{ }} }}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let _ = policy_lang::load_str("deep.vcl", &deep);
    let deep = format!("sub vcl_recv {{ {} }}", "if (true) {".repeat(3000));
    let _ = policy_lang::load_str("deep.vcl", &deep);
}
