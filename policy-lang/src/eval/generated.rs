//! A generated policy of a chosen size, for benches and performance guards (`test-util`).

use std::fmt::Write;

/// A policy with `rules` rules in `vcl_recv` (URL regexes, header tests, ACL checks, cookie
/// matches, backend hints, in turn) and as many TTL rules in `vcl_backend_response`: about
/// 7 lines per rule. The backend is `host:port`; a non-empty `deliver` becomes `vcl_deliver`'s body.
pub fn generated_policy(rules: usize, host: &str, port: u16, deliver: &str) -> String {
    let mut text = format!(
        "vcl 4.1;\nimport std;\nbackend default {{ .host = \"{host}\"; .port = \"{port}\"; }}\n\
         acl internal {{ \"10.0.0.0\"/8; \"192.168.0.0\"/16; }}\nsub vcl_recv {{\n"
    );
    for i in 0..rules {
        let rule = match i % 5 {
            0 => format!("    if (req.url ~ \"^/section{i}/\") {{\n        set req.http.X-Section = \"{i}\";\n    }}\n"),
            1 => format!("    if (req.http.X-Rule{i} == \"on\" && req.method == \"GET\") {{\n        return (pass);\n    }}\n"),
            2 => format!("    if (req.url ~ \"(?i)\\.(ext{i}|png)$\" && client.ip ~ internal) {{\n        unset req.http.Cookie;\n    }}\n"),
            3 => format!("    if (req.http.Cookie ~ \"session{i}=\") {{\n        return (pass);\n    }}\n"),
            _ => format!("    if (req.http.host == \"site{i}.example.com\") {{\n        set req.backend_hint = default;\n    }}\n"),
        };
        text.push_str(&rule);
    }
    text.push_str("}\nsub vcl_backend_response {\n");
    for i in 0..rules {
        let _ = write!(
            text,
            "    if (bereq.url ~ \"^/ttl{i}/\") {{\n        set beresp.ttl = {}s;\n        set beresp.http.X-Rule = \"r\" + {i};\n    }}\n",
            i + 1
        );
    }
    text.push_str("}\n");
    if !deliver.is_empty() {
        let _ = write!(text, "sub vcl_deliver {{\n{deliver}}}\n");
    }
    text
}
