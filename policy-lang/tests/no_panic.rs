//! Fuzz-style property tests: `load_str` never panics, whatever the input.
//! Seeds: arbitrary strings, VCL-ish token soup, and every example policy in
//! `examples/*.vcl` (plus the builtin VCL) mutated by deletions,
//! insertions, truncation and splices of example text.
//!
//! Each property runs `PROPTEST_CASES` cases (default 64, a few seconds in a
//! debug build); for a longer run: `PROPTEST_CASES=5000 cargo test -p
//! policy-lang --release --test no_panic`.

use proptest::prelude::*;

/// `(file name, text)` of every example policy, then the builtin VCL.
fn examples() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "vcl"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 3, "expected the example policies in {}", dir.display());
    v.push(("<builtin>".into(), policy_lang::BUILTIN_VCL.to_string()));
    v
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64)
}

/// One edit of a seed: `kind` picks it, `at`/`len` place it, `from`/`src`
/// (taken modulo the lengths) pick the spliced text, from any example; `c`
/// is an inserted character.
#[derive(Debug, Clone)]
struct Edit {
    kind: u8,
    at: usize,
    len: usize,
    from: usize,
    src: usize,
    c: char,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        0u8..7,
        any::<usize>(),
        1usize..80,
        any::<usize>(),
        any::<usize>(),
        any::<char>(),
    )
        .prop_map(|(kind, at, len, from, src, c)| Edit {
            kind,
            at,
            len,
            from,
            src,
            c,
        })
}

/// Applies `edits` to `seed` (chars, so the result stays valid UTF-8).
fn mutate(seed: &str, edits: &[Edit], corpus: &[Vec<char>]) -> String {
    let mut s: Vec<char> = seed.chars().collect();
    for e in edits {
        let at = e.at % (s.len() + 1);
        let end = (at + e.len).min(s.len());
        match e.kind {
            // Delete one character / a range.
            0 if at < s.len() => {
                s.remove(at);
            }
            1 => {
                s.drain(at..end);
            }
            // Insert a character / a VCL delimiter.
            2 => s.insert(at, e.c),
            3 => s.insert(
                at,
                ['{', '}', '(', ')', ';', '"', '~', '!', '.', '=', '\n'][e.len % 11],
            ),
            // Truncate.
            4 => s.truncate(at),
            // Splice in a piece of an example (insert, or replace a range).
            kind => {
                let src = &corpus[e.src % corpus.len()];
                let from = e.from % (src.len() + 1);
                let piece = &src[from..(from + e.len).min(src.len())];
                let cut = if kind == 5 { at..at } else { at..end };
                s.splice(cut, piece.iter().copied());
            }
        }
    }
    s.into_iter().collect()
}

fn load_does_not_panic(s: &str) {
    if let Err(d) = policy_lang::load_str("fuzz.vcl", s) {
        let _ = d.render();
    }
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
    let corpus: Vec<Vec<char>> = ex.iter().map(|(_, t)| t.chars().collect()).collect();
    (0..ex.len(), prop::collection::vec(edit(), 1..8))
        .prop_map(move |(i, edits)| mutate(&ex[i].1, &edits, &corpus))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

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
        load_does_not_panic(&s);
    }

    #[test]
    fn ban_parser_does_not_panic(s in "\\PC{0,80}") {
        let _ = policy_lang::parse_ban(&s).map_err(|d| d.render());
    }
}

/// Every example is a seed, whatever proptest draws: a few deterministic
/// mutations of each (an xorshift generator drives the same edits).
#[test]
fn every_example_seeds_mutations() {
    let ex = examples();
    let corpus: Vec<Vec<char>> = ex.iter().map(|(_, t)| t.chars().collect()).collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (name, text) in &ex {
        // The unmutated seed loads (the builtin VCL alone has no backend, fine).
        load_does_not_panic(text);
        for kind in 0..7u8 {
            let edits: Vec<Edit> = (0..3)
                .map(|_| Edit {
                    kind: (kind + (next() % 2) as u8) % 7,
                    at: next() as usize,
                    len: 1 + (next() % 79) as usize,
                    from: next() as usize,
                    src: next() as usize,
                    c: char::from_u32((next() % 0x250) as u32).unwrap_or('x'),
                })
                .collect();
            let s = mutate(text, &edits, &corpus);
            let outcome = std::panic::catch_unwind(|| load_does_not_panic(&s));
            assert!(outcome.is_ok(), "{name} mutated by {edits:?} panicked:\n{s}");
        }
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
