//! Source positions and diagnostics: `SourceMap`, `Span`, `Diagnostic`, `Diagnostics`.
//!
//! `Diagnostics` is the sink every pass pushes into; rendering is in `render.rs`,
//! did-you-mean suggestions in `suggest.rs`.

mod render;
mod suggest;

pub(crate) use suggest::did_you_mean;

use std::fmt;
use std::sync::Arc;

/// Index of a file in a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One loaded source file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    line_starts: Vec<u32>,
}

impl SourceFile {
    fn new(name: String, text: String) -> SourceFile {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        SourceFile {
            name,
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = offset.min(self.text.len() as u32);
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let mut end = offset as usize;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let col = self.text[start..end].chars().count();
        (line + 1, col + 1)
    }

    /// Text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self.line_starts[line - 1] as usize;
        let end = self
            .line_starts
            .get(line)
            .map(|e| *e as usize - 1)
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches('\r')
    }

    /// Byte offset where a 1-based line starts.
    pub(crate) fn line_start(&self, line: usize) -> usize {
        self.line_starts[line - 1] as usize
    }
}

/// Every file read while loading a policy, indexed by [`FileId`].
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile::new(name.into(), text.into()));
        FileId(self.files.len() as u32 - 1)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(i as u32), f))
    }

    pub fn find(&self, name: &str) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.name == name)
            .map(|i| FileId(i as u32))
    }

    pub fn text(&self, span: Span) -> &str {
        let f = self.get(span.file);
        f.text.get(span.start as usize..span.end as usize).unwrap_or("")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    /// Information that needs no change, e.g. a name an include fragment leaves to the file
    /// that includes it ([`check_fragment`](crate::check_fragment)).
    Note,
}

/// A stable diagnostic code. The docs (`docs/policy-language.md`) list each
/// one with an example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// E001 syntax error.
    Syntax,
    /// E002 include could not be loaded (I/O error, or includes not allowed).
    Include,
    /// E003 include cycle.
    IncludeCycle,
    /// E010 unknown variable.
    UnknownVariable,
    /// E011 variable not readable in this sub.
    NotReadable,
    /// E012 variable not writable in this sub.
    NotWritable,
    /// E013 variable cannot be unset.
    NotUnsettable,
    /// E020 type mismatch.
    TypeMismatch,
    /// E021 wrong arguments to a function.
    BadArguments,
    /// E022 unknown function.
    UnknownFunction,
    /// E030 return action not legal in this sub.
    IllegalReturn,
    /// E031 unknown return action.
    UnknownReturn,
    /// E040 undefined sub.
    UndefinedSub,
    /// E041 undefined backend.
    UndefinedBackend,
    /// E042 undefined ACL.
    UndefinedAcl,
    /// E043 undefined probe.
    UndefinedProbe,
    /// E044 duplicate definition.
    Duplicate,
    /// E045 recursive call.
    Recursion,
    /// E046 reserved / unknown `vcl_*` sub name.
    UnknownMethod,
    /// E047 undefined plugin.
    UndefinedPlugin,
    /// E050 regex does not compile (PCRE2 syntax). E051, for PCRE features the engine lacked,
    /// is retired: those patterns compile with PCRE2.
    BadRegex,
    /// E060 construct not supported by edgecache.
    Unsupported,
    /// E061 bad backend/probe/acl/plugin declaration.
    BadDeclaration,
    /// E062 statement not allowed in this sub.
    NotAllowedHere,
    /// W001 unused sub / backend / acl / probe.
    Unused,
    /// W002 construct accepted but has no effect in edgecache.
    NoEffect,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "E001",
            Code::Include => "E002",
            Code::IncludeCycle => "E003",
            Code::UnknownVariable => "E010",
            Code::NotReadable => "E011",
            Code::NotWritable => "E012",
            Code::NotUnsettable => "E013",
            Code::TypeMismatch => "E020",
            Code::BadArguments => "E021",
            Code::UnknownFunction => "E022",
            Code::IllegalReturn => "E030",
            Code::UnknownReturn => "E031",
            Code::UndefinedSub => "E040",
            Code::UndefinedBackend => "E041",
            Code::UndefinedAcl => "E042",
            Code::UndefinedProbe => "E043",
            Code::Duplicate => "E044",
            Code::Recursion => "E045",
            Code::UnknownMethod => "E046",
            Code::UndefinedPlugin => "E047",
            Code::BadRegex => "E050",
            Code::Unsupported => "E060",
            Code::BadDeclaration => "E061",
            Code::NotAllowedHere => "E062",
            Code::Unused => "W001",
            Code::NoEffect => "W002",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Code::Unused | Code::NoEffect => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A span with a message shown under it.
#[derive(Debug, Clone)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One problem found in a policy.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub primary: Label,
    pub secondary: Vec<Label>,
    pub hint: Option<String>,
    /// The problem is a name used but not declared (a sub, ACL, backend, object, import):
    /// something the file that includes a fragment may declare.
    pub(crate) undeclared: bool,
}

impl Diagnostic {
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            primary: Label {
                span,
                message: String::new(),
            },
            secondary: Vec::new(),
            hint: None,
            undeclared: false,
        }
    }

    /// Marks the problem as a name used but not declared (see [`check_fragment`](crate::check_fragment)).
    pub(crate) fn undeclared(mut self) -> Diagnostic {
        self.undeclared = true;
        self
    }

    /// Text under the primary caret.
    pub fn label(mut self, message: impl Into<String>) -> Diagnostic {
        self.primary.message = message.into();
        self
    }

    pub fn secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    pub fn maybe_hint(self, hint: Option<String>) -> Diagnostic {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Diagnostics from loading a policy, with the sources needed to render them.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    sources: Arc<SourceMap>,
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub(crate) fn new(sources: Arc<SourceMap>, mut items: Vec<Diagnostic>) -> Diagnostics {
        // Stable order: by file, then position; errors before warnings at one spot.
        items.sort_by_key(|d| (d.primary.span.file, d.primary.span.start, d.severity));
        Diagnostics { sources, items }
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }

    /// rustc-style text for every diagnostic, plus a summary line.
    pub fn render(&self) -> String {
        render::render_all(&self.sources, &self.items)
    }

    /// Location of a diagnostic as `(file name, line, column)`.
    pub fn location(&self, d: &Diagnostic) -> (&str, usize, usize) {
        let f = self.sources.get(d.primary.span.file);
        let (l, c) = f.line_col(d.primary.span.start);
        (&f.name, l, c)
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// The sink passes push into.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    pub items: Vec<Diagnostic>,
}

impl Sink {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }
}
