//! Checking a file made to be included on its own ([`check_fragment`](crate::check_fragment)).
//!
//! The names it leaves to the including file are notes, and its subs are not "never called".

use crate::diagnostics::{Code, Diagnostic, Severity};

/// The diagnostics of a fragment's check, from those of a whole policy's.
pub(crate) fn soften(items: Vec<Diagnostic>) -> Vec<Diagnostic> {
    items
        .into_iter()
        // Its subs, ACLs and backends are used by the file that includes it.
        .filter(|d| d.code != Code::Unused)
        .map(|mut d| {
            if d.undeclared {
                d.severity = Severity::Note;
                d.hint = Some(match d.hint.take() {
                    Some(hint) => format!("{hint}; fine in a fragment if the including file declares it"),
                    None => "fine in a fragment if the including file declares it".to_string(),
                });
            }
            d
        })
        .collect()
}
