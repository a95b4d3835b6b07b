//! Rendering diagnostics as rustc does, with the source line and carets:
//!
//! ```text
//! error[E010]: unknown variable `req.ulr`
//!  --> policy.vcl:3:9
//!   |
//! 3 |     if (req.ulr ~ "^/admin") {
//!   |         ^^^^^^^ not a VCL variable
//!   |
//!   = hint: did you mean `req.url`?
//! ```

use std::fmt::Write;

use super::{Diagnostic, Label, Severity, SourceMap};

pub(super) fn render_all(sources: &SourceMap, items: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in items {
        render_one(&mut out, sources, d);
        out.push('\n');
    }
    let errors = items.iter().filter(|d| d.is_error()).count();
    let notes = items.iter().filter(|d| d.severity == Severity::Note).count();
    let warnings = items.len() - errors - notes;
    match (errors, warnings) {
        (0, 0) if notes > 0 => {
            let _ = writeln!(out, "{} note{}", notes, plural(notes));
        }
        (0, 0) => {}
        (0, w) => {
            let _ = writeln!(out, "{} warning{} emitted", w, plural(w));
        }
        (e, 0) => {
            let _ = writeln!(out, "error: policy has {} error{}", e, plural(e));
        }
        (e, w) => {
            let _ = writeln!(
                out,
                "error: policy has {} error{} and {} warning{}",
                e,
                plural(e),
                w,
                plural(w)
            );
        }
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn render_one(out: &mut String, sources: &SourceMap, d: &Diagnostic) {
    let kind = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    };
    let _ = writeln!(out, "{}[{}]: {}", kind, d.code, d.message);

    // Gutter width = widest line number among all labels.
    let labels: Vec<&Label> = std::iter::once(&d.primary).chain(&d.secondary).collect();
    let width = labels
        .iter()
        .map(|l| sources.get(l.span.file).line_col(l.span.start).0)
        .max()
        .unwrap_or(1)
        .to_string()
        .len();
    let pad = " ".repeat(width);

    let file = sources.get(d.primary.span.file);
    let (line, col) = file.line_col(d.primary.span.start);
    let _ = writeln!(out, "{pad}--> {}:{}:{}", file.name, line, col);
    let _ = writeln!(out, "{pad} |");
    // Labels in the primary's file, in line order; others get their own block.
    let mut here: Vec<(&Label, char)> = vec![(&d.primary, '^')];
    here.extend(
        d.secondary
            .iter()
            .filter(|l| l.span.file == d.primary.span.file)
            .map(|l| (l, '-')),
    );
    here.sort_by_key(|(l, _)| l.span.start);
    let mut last_line = None;
    for (l, mark) in here {
        let (ll, _) = file.line_col(l.span.start);
        if let Some(prev) = last_line {
            if ll > prev + 1 {
                let _ = writeln!(out, "{}...", " ".repeat(pad.len().saturating_sub(1)));
            }
        }
        snippet(out, sources, l, mark, &pad, last_line == Some(ll));
        last_line = Some(ll);
    }
    for l in d.secondary.iter().filter(|l| l.span.file != d.primary.span.file) {
        let f = sources.get(l.span.file);
        let (ll, lc) = f.line_col(l.span.start);
        let _ = writeln!(out, "{pad}::: {}:{}:{}", f.name, ll, lc);
        let _ = writeln!(out, "{pad} |");
        snippet(out, sources, l, '-', &pad, false);
    }
    if let Some(h) = &d.hint {
        let _ = writeln!(out, "{pad} |");
        let mut lines = h.lines();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "{pad} = hint: {first}");
        }
        for rest in lines {
            let _ = writeln!(out, "{pad}         {rest}");
        }
    }
}

fn snippet(out: &mut String, sources: &SourceMap, label: &Label, mark: char, pad: &str, same_line: bool) {
    let file = sources.get(label.span.file);
    let (line, col) = file.line_col(label.span.start);
    let text = file.line_text(line);
    if !same_line {
        let _ = writeln!(out, "{:>w$} | {}", line, text.replace('\t', " "), w = pad.len());
    }
    // Caret length: the span's characters on this first line (at least one).
    let line_start = file.line_start(line);
    let line_end = line_start + text.len();
    let start = (label.span.start as usize).clamp(line_start, line_end);
    let end = (label.span.end as usize).clamp(start, line_end);
    let n = file.text.get(start..end).map_or(1, |s| s.chars().count()).max(1);
    let mut carets = String::new();
    carets.extend(std::iter::repeat_n(mark, n));
    let indent = " ".repeat(col - 1);
    if label.message.is_empty() {
        let _ = writeln!(out, "{pad} | {indent}{carets}");
    } else {
        let _ = writeln!(out, "{pad} | {indent}{carets} {}", label.message);
    }
}
