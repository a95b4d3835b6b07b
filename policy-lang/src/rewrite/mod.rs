//! The second front end: LiteSpeed / Apache `.htaccess` rewrite rules (the LSCache subset of
//! mod_rewrite and LiteSpeed's cache switches), read and written out as the VCL policy that
//! behaves the same, which the pipeline then parses, checks and compiles as any VCL file.
//!
//! Lowering to VCL source rather than to the AST keeps one program model and makes
//! `edgecache check --explain` exact: the VCL it prints is the policy that runs. What the VCL
//! checker would refuse (a regex that does not compile, an unknown variable) is checked here
//! first, so every diagnostic points into the rules file.

mod lower;
mod parse;

use crate::diagnostics::{FileId, Sink, SourceFile};

/// The VCL of the rules file `file` (`source`), or `None` when `sink` got an error.
pub(crate) fn to_vcl(file: FileId, source: &SourceFile, sink: &mut Sink) -> Option<String> {
    let lines = match parse::parse(file, &source.text) {
        Ok(lines) => lines,
        Err(error) => {
            sink.push(error);
            return None;
        }
    };
    lower::lower(file, source, &lines, sink)
}

#[cfg(test)]
mod tests;
