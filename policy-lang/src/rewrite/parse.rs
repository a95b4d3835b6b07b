//! The pest grammar of `.htaccess` files (`grammar.pest`) and its lowering to [`Line`]s: the
//! directives and section tags with their spans. The only file of `rewrite/` that knows pest.

use pest::Parser;
use pest_derive::Parser;

use crate::diagnostics::{Code, Diagnostic, FileId, Span};

#[derive(Parser)]
#[grammar = "rewrite/grammar.pest"]
struct HtaccessParser;

/// A word of the file and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    pub span: Span,
}

/// One line of the file that says something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// `Name arg arg ...` (arguments unquoted).
    Directive { name: Word, args: Vec<Word>, span: Span },
    /// `<Name arg>`.
    Open {
        name: Word,
        arg: Option<Word>,
        span: Span,
    },
    /// `</Name>`.
    Close { name: Word, span: Span },
}

/// The lines of file `file`, or the syntax error that stops reading it.
pub(crate) fn parse(file: FileId, text: &str) -> Result<Vec<Line>, Diagnostic> {
    let pairs = HtaccessParser::parse(Rule::file, text).map_err(|error| syntax_error(file, error))?;
    let word = |pair: pest::iterators::Pair<'_, Rule>| {
        let span = Span::new(file, pair.as_span().start(), pair.as_span().end());
        let text = match pair.as_rule() {
            Rule::quoted => unquote(pair.as_str()),
            _ => pair.as_str().to_string(),
        };
        Word { text, span }
    };
    let mut lines = Vec::new();
    for pair in pairs.flatten() {
        let span = Span::new(file, pair.as_span().start(), pair.as_span().end());
        let rule = pair.as_rule();
        let mut inner = pair.into_inner();
        match rule {
            Rule::directive => {
                let name = word(inner.next().expect("a directive has a name"));
                lines.push(Line::Directive {
                    name,
                    args: inner.map(word).collect(),
                    span,
                });
            }
            Rule::section_open => {
                let name = word(inner.next().expect("a section has a name"));
                lines.push(Line::Open {
                    name,
                    arg: inner.next().map(word),
                    span,
                });
            }
            Rule::section_close => {
                let name = word(inner.next().expect("a section has a name"));
                lines.push(Line::Close { name, span });
            }
            _ => {}
        }
    }
    Ok(lines)
}

/// A quoted argument's text: the quotes removed, `\"` and `\\` unescaped (as Apache reads them).
fn unquote(quoted: &str) -> String {
    let inner = &quoted[1..quoted.len() - 1];
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('"' | '\\'))) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

fn syntax_error(file: FileId, error: pest::error::Error<Rule>) -> Diagnostic {
    let at = match error.location {
        pest::error::InputLocation::Pos(at) => at,
        pest::error::InputLocation::Span((at, _)) => at,
    };
    Diagnostic::new(Code::Syntax, Span::new(file, at, at + 1), "this line cannot be read as a directive")
        .label("unexpected here")
        .hint("each line is a directive (`RewriteRule PATTERN TARGET [FLAGS]`), a `<IfModule ...>` / `</IfModule>` tag or a `#` comment; a quoted argument ends on its line")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &Line) -> Vec<&str> {
        match line {
            Line::Directive { name, args, .. } => std::iter::once(name.text.as_str())
                .chain(args.iter().map(|a| a.text.as_str()))
                .collect(),
            Line::Open { name, arg, .. } => std::iter::once(name.text.as_str())
                .chain(arg.iter().map(|a| a.text.as_str()))
                .collect(),
            Line::Close { name, .. } => vec![name.text.as_str()],
        }
    }

    #[test]
    fn directives_sections_and_comments_are_read_line_by_line() {
        let text = "# a comment\n<IfModule mod_rewrite.c>\n  RewriteEngine on\n\tRewriteRule test.php - [E=Cache-Control:max-age=45]\n</IfModule>";
        let lines = parse(FileId(0), text).unwrap();
        let read: Vec<Vec<&str>> = lines.iter().map(texts).collect();
        assert_eq!(
            read,
            vec![
                vec!["IfModule", "mod_rewrite.c"],
                vec!["RewriteEngine", "on"],
                vec!["RewriteRule", "test.php", "-", "[E=Cache-Control:max-age=45]"],
                vec!["IfModule"],
            ]
        );
        assert!(matches!(lines[0], Line::Open { .. }));
        assert!(matches!(lines[3], Line::Close { .. }));
    }

    #[test]
    fn quoted_arguments_keep_their_spaces_and_unescape_quotes() {
        let lines = parse(
            FileId(0),
            "RewriteCond %{HTTP_USER_AGENT} \"Mobile \\\"x\\\" Safari\" [NC]\n",
        )
        .unwrap();
        assert_eq!(
            texts(&lines[0]),
            vec!["RewriteCond", "%{HTTP_USER_AGENT}", "Mobile \"x\" Safari", "[NC]"]
        );
    }

    #[test]
    fn a_backslash_at_the_end_of_a_line_continues_the_directive() {
        let lines = parse(FileId(0), "RewriteRule ^old$ /new \\\n    [R=301,L]\n").unwrap();
        assert_eq!(
            texts(&lines[0]),
            vec!["RewriteRule", "^old$", "/new", "[R=301,L]"]
        );
    }

    #[test]
    fn spans_point_at_each_word() {
        let text = "RewriteEngine on\nRewriteBase /blog/\n";
        let lines = parse(FileId(0), text).unwrap();
        let Line::Directive { args, .. } = &lines[1] else {
            panic!("{lines:?}")
        };
        assert_eq!(
            &text[args[0].span.start as usize..args[0].span.end as usize],
            "/blog/"
        );
    }

    #[test]
    fn an_unterminated_quote_is_a_syntax_error_at_its_line() {
        let error = parse(FileId(0), "RewriteEngine on\nRewriteCond %{HTTP_HOST} \"www\n").unwrap_err();
        assert_eq!(error.code, Code::Syntax);
    }
}
