//! Parsing: pest pairs -> the spanned AST; the only file that knows pest types.
//!
//! Every `pest::Span` becomes a `diagnostics::Span`, and parse errors become a
//! `Diagnostic` whose message names tokens (`expected `;``), not rules.

use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser;

use super::*;
use crate::diagnostics::{Code, Diagnostic, FileId, Sink, Span};
use crate::grammar::{describe_rule, Rule, VclParser};

/// Parses one file. Syntax errors stop at the first one (pest does not
/// recover); literal errors (number overflow) are pushed and parsing goes on.
pub(crate) fn parse_file(file: FileId, text: &str, sink: &mut Sink) -> Option<Module> {
    if too_deep(file, text, sink) {
        return None;
    }
    match VclParser::parse(Rule::vcl_file, text) {
        Ok(mut pairs) => {
            let root = pairs.next()?;
            let l = Lower { file, sink };
            Some(l.module(root))
        }
        Err(e) => {
            sink.push(syntax_error(file, text, e));
            None
        }
    }
}

/// Parses a file included inside a sub: statements only.
pub(crate) fn parse_fragment(file: FileId, text: &str, sink: &mut Sink) -> Option<Vec<Stmt>> {
    if too_deep(file, text, sink) {
        return None;
    }
    match VclParser::parse(Rule::vcl_fragment, text) {
        Ok(mut pairs) => {
            let root = pairs.next()?;
            let mut l = Lower { file, sink };
            Some(root.into_inner().filter_map(|p| l.stmt(p)).collect())
        }
        Err(e) => {
            sink.push(syntax_error(file, text, e));
            None
        }
    }
}

/// Bound on bracket nesting, so recursive passes cannot exhaust the stack.
const MAX_DEPTH: usize = 256;

/// Bound on the operands of one operator chain (`a || b || ...`) and on repeated `!`: each
/// adds a level to the expression tree that later passes walk recursively.
const MAX_OPERANDS: usize = 500;

/// Reports (and says) whether brackets in `text` nest deeper than [`MAX_DEPTH`].
fn too_deep(file: FileId, text: &str, sink: &mut Sink) -> bool {
    let mut depth = 0usize;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'(' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    sink.push(
                        Diagnostic::new(Code::Syntax, Span::new(file, i, i + 1), "nesting is too deep")
                            .label(format!("more than {MAX_DEPTH} levels of `(` / `{{`")),
                    );
                    return true;
                }
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn syntax_error(file: FileId, text: &str, e: pest::error::Error<Rule>) -> Diagnostic {
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    // Underline the token found at the error position.
    let rest = &text[pos..];
    let tok_len = token_len(rest);
    let span = Span::new(file, pos, pos + tok_len);
    let found = if rest.is_empty() {
        "end of file".to_string()
    } else {
        format!("`{}`", &rest[..tok_len])
    };
    let mut expected: Vec<&'static str> = match &e.variant {
        // Inline C is recognised only to be refused: never suggest it.
        ErrorVariant::ParsingError { positives, .. } => positives
            .iter()
            .filter(|r| **r != Rule::inline_c)
            .map(describe_rule)
            .collect(),
        ErrorVariant::CustomError { .. } => Vec::new(),
    };
    expected.sort();
    expected.dedup();
    // Punctuation first: it is what is usually missing.
    expected.sort_by_key(|s| !s.starts_with('`'));
    let message = match expected.len() {
        0 => format!("unexpected {found}"),
        1 => format!("expected {}, found {found}", expected[0]),
        _ => {
            let (last, init) = expected.split_last().unwrap_or((&"", &[]));
            format!("expected {} or {last}, found {found}", init.join(", "))
        }
    };
    if rest.trim().is_empty() && expected.contains(&"`}`") {
        let mut d = Diagnostic::new(Code::Syntax, span, "unexpected end of file: expected `}`")
            .label("file ends here");
        if let Some(open) = unclosed_brace(text) {
            d = d.secondary(Span::new(file, open, open + 1), "this `{` is never closed");
        }
        return d.hint("add the missing `}`");
    }
    let mut d = if expected.first() == Some(&"`;`") && pos > 0 {
        // Point just after the previous token, where the `;` belongs.
        let prev_end = text[..pos].trim_end().len();
        Diagnostic::new(Code::Syntax, Span::new(file, prev_end, prev_end), message)
            .label("expected `;` here")
            .secondary(span, "unexpected token")
    } else {
        Diagnostic::new(Code::Syntax, span, message).label("unexpected token here")
    };
    if let Some(h) = syntax_hint(text, pos, &expected) {
        d = d.hint(h);
    }
    d
}

/// Byte offset of the last `{` that has no matching `}` (strings and comments skipped).
fn unclosed_brace(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut stack = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'"') => {
                i = text[i + 2..].find("\"}").map_or(b.len(), |e| i + 2 + e + 2);
                continue;
            }
            b'"' => {
                i = text[i + 1..].find(['"', '\n']).map_or(b.len(), |e| i + 1 + e + 1);
                continue;
            }
            b'#' => {
                i = text[i..].find('\n').map_or(b.len(), |e| i + e);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(b.len(), |e| i + e);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                continue;
            }
            b'{' => stack.push(i),
            b'}' => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    stack.pop()
}

fn token_len(rest: &str) -> usize {
    let mut chars = rest.char_indices();
    match chars.next() {
        None => 0,
        Some((_, c)) if c.is_ascii_alphanumeric() || c == '_' => rest
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-' || *c == '.'))
            .map_or(rest.len(), |(i, _)| i),
        Some((_, c)) => c.len_utf8(),
    }
}

fn syntax_hint(text: &str, pos: usize, expected: &[&str]) -> Option<String> {
    if expected.contains(&"`;`") {
        return Some("statements and attributes end with `;`".into());
    }
    let rest = &text[pos..];
    if rest.starts_with('\'') {
        return Some("VCL strings use double quotes: \"...\" or {\"...\"}".into());
    }
    if rest.starts_with("error ") || rest.starts_with("error\t") {
        return Some("`error` is Varnish 3 syntax; use `return (synth(STATUS, \"reason\"));`".into());
    }
    None
}

struct Lower<'s> {
    file: FileId,
    sink: &'s mut Sink,
}

impl Lower<'_> {
    fn span(&self, p: &Pair<'_, Rule>) -> Span {
        let s = p.as_span();
        Span::new(self.file, s.start(), s.end())
    }

    fn ident(&self, p: Pair<'_, Rule>) -> Ident {
        Ident {
            name: p.as_str().to_string(),
            span: self.span(&p),
        }
    }

    fn module(mut self, root: Pair<'_, Rule>) -> Module {
        let mut decls = Vec::new();
        for p in root.into_inner() {
            let span = self.span(&p);
            match p.as_rule() {
                Rule::vcl_version => {
                    let v = p
                        .into_inner()
                        .find(|p| p.as_rule() == Rule::version_number)
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_default();
                    decls.push(Decl::Version { version: v, span });
                }
                Rule::import_decl => {
                    if let Some(id) = p.into_inner().find(|p| p.as_rule() == Rule::ident) {
                        let name = self.ident(id);
                        decls.push(Decl::Import { name });
                    }
                }
                Rule::include_decl => {
                    if let Some(s) = p.into_inner().find(|p| p.as_rule() == Rule::string) {
                        let path = string_value(s);
                        decls.push(Decl::Include { path, span });
                    }
                }
                Rule::backend_decl => decls.push(Decl::Backend(self.backend(p))),
                Rule::probe_decl => {
                    let mut name = None;
                    let mut attrs = Vec::new();
                    for q in p.into_inner() {
                        match q.as_rule() {
                            Rule::ident => name = Some(self.ident(q)),
                            Rule::attribute_block => attrs = self.attributes(q),
                            _ => {}
                        }
                    }
                    if let Some(name) = name {
                        decls.push(Decl::Probe(ProbeDef { name, attrs, span }));
                    }
                }
                Rule::plugin_decl => {
                    let mut name = None;
                    let mut attrs = Vec::new();
                    for q in p.into_inner() {
                        match q.as_rule() {
                            Rule::ident => name = Some(self.ident(q)),
                            Rule::attribute_block => attrs = self.attributes(q),
                            _ => {}
                        }
                    }
                    if let Some(name) = name {
                        decls.push(Decl::Plugin(PluginDef { name, attrs, span }));
                    }
                }
                Rule::acl_decl => decls.push(Decl::Acl(self.acl(p))),
                Rule::inline_c => self.inline_c(span),
                Rule::sub_decl => {
                    let mut name = None;
                    let mut body = Vec::new();
                    for q in p.into_inner() {
                        match q.as_rule() {
                            Rule::ident => name = Some(self.ident(q)),
                            Rule::block => body = self.block(q),
                            _ => {}
                        }
                    }
                    if let Some(name) = name {
                        decls.push(Decl::Sub(SubDef { name, body, span }));
                    }
                }
                _ => {}
            }
        }
        Module { decls }
    }

    /// `C{ ... }C`: reported once per block (at its `C{`), then left out.
    fn inline_c(&mut self, block: Span) {
        let span = Span {
            end: block.start + 2,
            ..block
        };
        self.sink.push(
            Diagnostic::new(Code::Unsupported, span, "inline C (`C{ ... }C`) is not supported")
                .label("edgecache does not compile or run C code")
                .hint("Varnish also refuses it unless `vcc_allow_inline_c` is on; do it in VCL (std, the vmods edgecache provides) or in a WebAssembly plugin: `plugin NAME { .path = \"NAME.wasm\"; }` and `plugin.request(NAME);` (docs/plugins.md)"),
        );
    }

    fn backend(&mut self, p: Pair<'_, Rule>) -> BackendDef {
        let span = self.span(&p);
        let mut name = Ident {
            name: String::new(),
            span,
        };
        let mut none = false;
        let mut attrs = Vec::new();
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::ident => name = self.ident(q),
                Rule::kw_none => none = true,
                Rule::attribute_block => attrs = self.attributes(q),
                _ => {}
            }
        }
        BackendDef {
            name,
            none,
            attrs,
            span,
        }
    }

    fn attributes(&mut self, block: Pair<'_, Rule>) -> Vec<Attr> {
        let mut out = Vec::new();
        for a in block.into_inner() {
            if a.as_rule() != Rule::attribute {
                continue;
            }
            let span = self.span(&a);
            let mut name = None;
            let mut value = None;
            for q in a.into_inner() {
                match q.as_rule() {
                    Rule::attr_name => {
                        let s = self.span(&q);
                        name = Some(Ident {
                            name: q.as_str()[1..].to_string(),
                            span: s,
                        });
                    }
                    Rule::attribute_block => {
                        let s = self.span(&q);
                        value = Some(AttrValue::Block(self.attributes(q), s));
                    }
                    Rule::attr_value => {
                        if let Some(v) = q.into_inner().next() {
                            value = Some(match v.as_rule() {
                                Rule::string_list => AttrValue::Strings(
                                    v.into_inner()
                                        .map(|s| {
                                            let sp = self.span(&s);
                                            (string_value(s), sp)
                                        })
                                        .collect(),
                                ),
                                _ => AttrValue::Expr(self.expr(v)),
                            });
                        }
                    }
                    _ => {}
                }
            }
            if let (Some(name), Some(value)) = (name, value) {
                out.push(Attr { name, value, span });
            }
        }
        out
    }

    fn acl(&mut self, p: Pair<'_, Rule>) -> AclDef {
        let span = self.span(&p);
        let mut name = Ident {
            name: String::new(),
            span,
        };
        let mut entries = Vec::new();
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::ident => name = self.ident(q),
                Rule::acl_entry => {
                    let espan = self.span(&q);
                    let mut e = AclEntry {
                        negated: false,
                        optional: false,
                        addr: String::new(),
                        addr_span: espan,
                        mask: None,
                        span: espan,
                    };
                    for r in q.into_inner() {
                        match r.as_rule() {
                            Rule::acl_negate => e.negated = true,
                            Rule::lparen => e.optional = true,
                            Rule::acl_addr => {
                                for s in r.into_inner() {
                                    match s.as_rule() {
                                        Rule::string => {
                                            e.addr_span = self.span(&s);
                                            e.addr = string_value(s);
                                        }
                                        Rule::acl_mask => {
                                            let sp = self.span(&s);
                                            let m = s.as_str().parse().unwrap_or(u32::MAX);
                                            e.mask = Some((m, sp));
                                        }
                                        _ => {}
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    entries.push(e);
                }
                _ => {}
            }
        }
        AclDef { name, entries, span }
    }

    fn block(&mut self, p: Pair<'_, Rule>) -> Vec<Stmt> {
        let mut out = Vec::new();
        for q in p.into_inner() {
            if let Some(s) = self.stmt(q) {
                out.push(s);
            }
        }
        out
    }

    fn stmt(&mut self, p: Pair<'_, Rule>) -> Option<Stmt> {
        let span = self.span(&p);
        let kind = match p.as_rule() {
            Rule::inline_c => {
                self.inline_c(span);
                return None;
            }
            Rule::set_stmt => {
                let mut target = None;
                let mut op = AssignOp::Set;
                let mut value = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::lvalue => target = q.into_inner().next().map(|n| self.ident(n)),
                        Rule::assign_op => {
                            op = match q.as_str() {
                                "+=" => AssignOp::Add,
                                "-=" => AssignOp::Sub,
                                "*=" => AssignOp::Mul,
                                "/=" => AssignOp::Div,
                                _ => AssignOp::Set,
                            }
                        }
                        Rule::expr => value = Some(self.expr(q)),
                        _ => {}
                    }
                }
                StmtKind::Set {
                    target: target?,
                    op,
                    value: value?,
                }
            }
            Rule::unset_stmt => {
                let mut legacy = false;
                let mut target = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::kw_remove => legacy = true,
                        Rule::lvalue => target = q.into_inner().next().map(|n| self.ident(n)),
                        _ => {}
                    }
                }
                StmtKind::Unset {
                    target: target?,
                    legacy,
                }
            }
            Rule::if_stmt => {
                let mut branches = Vec::new();
                let mut otherwise = None;
                let mut cond = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::expr => cond = Some(self.expr(q)),
                        Rule::block => {
                            let b = self.block(q);
                            branches.push((cond.take()?, b));
                        }
                        Rule::elsif_clause => {
                            let mut c = None;
                            for r in q.into_inner() {
                                match r.as_rule() {
                                    Rule::expr => c = Some(self.expr(r)),
                                    Rule::block => {
                                        let b = self.block(r);
                                        branches.push((c.take()?, b));
                                    }
                                    _ => {}
                                }
                            }
                        }
                        Rule::else_clause => {
                            let b = q.into_inner().find(|r| r.as_rule() == Rule::block)?;
                            otherwise = Some(self.block(b));
                        }
                        _ => {}
                    }
                }
                StmtKind::If { branches, otherwise }
            }
            Rule::return_stmt => {
                let action = p
                    .into_inner()
                    .find(|q| q.as_rule() == Rule::return_action)
                    .and_then(|q| {
                        let aspan = self.span(&q);
                        let mut name = None;
                        let mut args = None;
                        for r in q.into_inner() {
                            match r.as_rule() {
                                Rule::ident => name = Some(self.ident(r)),
                                Rule::lparen => args = Some(Vec::new()),
                                Rule::arguments => args = Some(self.arguments(r)),
                                _ => {}
                            }
                        }
                        Some(ReturnAction {
                            name: name?,
                            args,
                            span: aspan,
                        })
                    });
                StmtKind::Return(action)
            }
            Rule::call_stmt => {
                let id = p.into_inner().find(|q| q.as_rule() == Rule::ident)?;
                StmtKind::Call(self.ident(id))
            }
            Rule::new_stmt => {
                let mut name = None;
                let mut ctor = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::ident => name = Some(self.ident(q)),
                        Rule::function_call => ctor = Some(self.expr(q)),
                        _ => {}
                    }
                }
                StmtKind::New {
                    name: name?,
                    ctor: ctor?,
                }
            }
            Rule::block => StmtKind::Block(self.block(p)),
            Rule::include_decl => StmtKind::Include(string_value(
                p.into_inner().find(|q| q.as_rule() == Rule::string)?,
            )),
            Rule::call_expr_stmt => {
                let c = p.into_inner().next()?;
                StmtKind::Expr(self.expr(c))
            }
            _ => return None,
        };
        Some(Stmt { kind, span })
    }

    fn arguments(&mut self, p: Pair<'_, Rule>) -> Vec<Arg> {
        let mut out = Vec::new();
        for a in p.into_inner() {
            if a.as_rule() != Rule::argument {
                continue;
            }
            let mut name = None;
            let mut value = None;
            for q in a.into_inner() {
                match q.as_rule() {
                    Rule::arg_name => name = Some(self.ident(q)),
                    Rule::expr => value = Some(self.expr(q)),
                    _ => {}
                }
            }
            if let Some(value) = value {
                out.push(Arg { name, value });
            }
        }
        out
    }

    /// Left-associative chain: `a op b op c`.
    fn chain(&mut self, p: Pair<'_, Rule>) -> Expr {
        let operands = p.clone().into_inner().count().div_ceil(2);
        if operands > MAX_OPERANDS {
            let span = self.span(&p);
            self.sink.push(
                Diagnostic::new(
                    Code::Syntax,
                    span,
                    format!("expression with {operands} operands in one chain"),
                )
                .label(format!("at most {MAX_OPERANDS}"))
                .hint("test many values at once with a regex (`req.url ~ \"^/(a|b|c)$\"`) or an ACL, or split the condition over several `if`s"),
            );
            return bad(span);
        }
        let mut inner = p.into_inner();
        let first = match inner.next() {
            Some(f) => f,
            None => {
                return Expr {
                    kind: ExprKind::Bool(false),
                    span: Span::default(),
                }
            }
        };
        let mut lhs = self.expr(first);
        while let (Some(op), Some(rhs)) = (inner.next(), inner.next()) {
            let op_span = self.span(&op);
            let op = match op.as_str() {
                "||" => BinOp::Or,
                "&&" => BinOp::And,
                "==" => BinOp::Cmp(CmpOp::Eq),
                "!=" => BinOp::Cmp(CmpOp::Ne),
                "<" => BinOp::Cmp(CmpOp::Lt),
                ">" => BinOp::Cmp(CmpOp::Gt),
                "<=" => BinOp::Cmp(CmpOp::Le),
                ">=" => BinOp::Cmp(CmpOp::Ge),
                "~" => BinOp::Match,
                "!~" => BinOp::NotMatch,
                "+" => BinOp::Arith(ArithOp::Add),
                "-" => BinOp::Arith(ArithOp::Sub),
                "*" => BinOp::Arith(ArithOp::Mul),
                "/" => BinOp::Arith(ArithOp::Div),
                _ => BinOp::Arith(ArithOp::Rem),
            };
            let rhs = self.expr(rhs);
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    op_span,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        lhs
    }

    fn expr(&mut self, p: Pair<'_, Rule>) -> Expr {
        let span = self.span(&p);
        match p.as_rule() {
            Rule::expr | Rule::and_expr | Rule::cmp_expr | Rule::add_expr | Rule::mul_expr => {
                let n = p.clone().into_inner().count();
                if n == 1 {
                    match p.into_inner().next() {
                        Some(q) => self.expr(q),
                        None => bad(span),
                    }
                } else {
                    self.chain(p)
                }
            }
            Rule::not_expr => {
                let mut nots = Vec::new();
                let mut inner = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::not_op => nots.push(self.span(&q)),
                        _ => inner = Some(self.expr(q)),
                    }
                }
                if nots.len() > MAX_OPERANDS {
                    self.sink.push(
                        Diagnostic::new(Code::Syntax, span, format!("{} `!` in a row", nots.len()))
                            .label(format!("at most {MAX_OPERANDS}"))
                            .hint("two `!` cancel out: keep one or none"),
                    );
                    return bad(span);
                }
                let mut e = match inner {
                    Some(e) => e,
                    None => return bad(span),
                };
                for s in nots.into_iter().rev() {
                    let span = s.to(e.span);
                    e = Expr {
                        kind: ExprKind::Not(Box::new(e)),
                        span,
                    };
                }
                e
            }
            Rule::unary_expr => {
                let mut neg = false;
                let mut inner = None;
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::neg_op => neg = true,
                        _ => inner = Some(self.expr(q)),
                    }
                }
                let e = match inner {
                    Some(e) => e,
                    None => return bad(span),
                };
                if !neg {
                    return e;
                }
                // Fold negative literals right here.
                let kind = match e.kind {
                    ExprKind::Int(i) => ExprKind::Int(-i),
                    ExprKind::Real(r) => ExprKind::Real(-r),
                    ExprKind::Duration(d) => ExprKind::Duration(-d),
                    other => ExprKind::Neg(Box::new(Expr {
                        kind: other,
                        span: e.span,
                    })),
                };
                Expr { kind, span }
            }
            Rule::paren_expr => match p.into_inner().find(|q| q.as_rule() == Rule::expr) {
                Some(q) => {
                    let mut e = self.expr(q);
                    e.span = span;
                    e
                }
                None => bad(span),
            },
            Rule::function_call => {
                let mut func = None;
                let mut args = Vec::new();
                for q in p.into_inner() {
                    match q.as_rule() {
                        Rule::name => func = Some(self.ident(q)),
                        Rule::arguments => args = self.arguments(q),
                        _ => {}
                    }
                }
                match func {
                    Some(func) => Expr {
                        kind: ExprKind::Call { func, args },
                        span,
                    },
                    None => bad(span),
                }
            }
            Rule::name => Expr {
                kind: ExprKind::Name(p.as_str().to_string()),
                span,
            },
            Rule::string => Expr {
                kind: ExprKind::Str(string_value(p)),
                span,
            },
            Rule::boolean => Expr {
                kind: ExprKind::Bool(p.as_str() == "true"),
                span,
            },
            Rule::number => {
                let s = p.as_str();
                let kind = if s.contains('.') {
                    ExprKind::Real(s.parse().unwrap_or(0.0))
                } else {
                    match s.parse::<i64>() {
                        Ok(i) => ExprKind::Int(i),
                        Err(_) => {
                            self.sink.push(
                                Diagnostic::new(Code::Syntax, span, "integer literal is too large")
                                    .label("does not fit in 64 bits"),
                            );
                            ExprKind::Int(0)
                        }
                    }
                };
                Expr { kind, span }
            }
            Rule::duration => {
                let s = p.as_str();
                let split = s
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(s.len());
                let (num, unit) = s.split_at(split);
                let n: f64 = num.parse().unwrap_or(0.0);
                let mult = match unit {
                    "ms" => 0.001,
                    "s" => 1.0,
                    "m" => 60.0,
                    "h" => 3600.0,
                    "d" => 86400.0,
                    "w" => 7.0 * 86400.0,
                    _ => 365.0 * 86400.0,
                };
                Expr {
                    kind: ExprKind::Duration(n * mult),
                    span,
                }
            }
            Rule::bytes => {
                let s = p.as_str();
                let split = s
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(s.len());
                let (num, unit) = s.split_at(split);
                let n: f64 = num.parse().unwrap_or(0.0);
                let mult: f64 = match unit.to_ascii_uppercase().as_str() {
                    "KB" => 1024.0,
                    "MB" => 1024.0 * 1024.0,
                    "GB" => 1024.0 * 1024.0 * 1024.0,
                    "TB" => 1024f64.powi(4),
                    "PB" => 1024f64.powi(5),
                    _ => 1.0,
                };
                Expr {
                    kind: ExprKind::Bytes((n * mult) as u64),
                    span,
                }
            }
            _ => {
                // Silent wrappers (`primary`, `literal`) never reach here;
                // anything else is a grammar/lowering mismatch.
                match p.into_inner().next() {
                    Some(q) => self.expr(q),
                    None => bad(span),
                }
            }
        }
    }
}

fn bad(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Bool(false),
        span,
    }
}

/// The bytes between a string literal's delimiters (VCL does no escape processing).
fn string_value(p: Pair<'_, Rule>) -> String {
    let inner = p.into_inner().next();
    let (rule, s) = match &inner {
        Some(i) => (i.as_rule(), i.as_str()),
        None => return String::new(),
    };
    let body = match rule {
        Rule::long_string3 => &s[3..s.len() - 3],
        Rule::long_string => &s[2..s.len() - 2],
        _ => &s[1..s.len() - 1],
    };
    body.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Module, Vec<Diagnostic>> {
        let mut sink = Sink::default();
        match parse_file(FileId(0), src, &mut sink) {
            Some(m) if !sink.has_errors() => Ok(m),
            _ => Err(sink.items),
        }
    }

    #[test]
    fn parses_a_small_policy() {
        let m = parse(
            r#"vcl 4.1;
            import std;
            backend default { .host = "127.0.0.1"; .port = "8080"; .probe = { .url = "/"; } }
            acl purge { "localhost"; "10.0.0.0"/8; ! "10.1.2.3"; }
            sub vcl_recv {
                if (req.method == "PURGE" && !client.ip ~ purge) { return (synth(405, "No")); }
                elsif (req.url ~ {"^/static"}) { unset req.http.Cookie; }
                else if (req.http.X-Foo) { set req.http.X-Bar = "a" + req.url; }
                else { return (hash); }
                set req.http.host = req.http.host.lower();
                std.log("hello");
            }
            "#,
        )
        .expect("parses");
        assert_eq!(m.decls.len(), 5);
    }

    #[test]
    fn parses_plugin_declarations_and_calls() {
        let m = parse(
            r#"plugin auth {
                .path = "plugins/auth.wasm";
                .config = """{"key": "s3cret"}""";
                .on_error = continue;
                .isolation = per_request;
            }
            plugin hdr { .path = "h.wasm"; .config = {"a "b" c"}; }
            sub vcl_recv { plugin.request(auth); }
            sub vcl_deliver { plugin.response(hdr); }
            "#,
        )
        .expect("parses");
        assert_eq!(m.decls.len(), 4);
        let Decl::Plugin(p) = &m.decls[0] else { panic!() };
        assert_eq!(p.name.name, "auth");
        let names: Vec<&str> = p.attrs.iter().map(|a| a.name.name.as_str()).collect();
        assert_eq!(names, ["path", "config", "on_error", "isolation"]);
        let AttrValue::Expr(e) = &p.attrs[1].value else {
            panic!()
        };
        assert!(matches!(&e.kind, ExprKind::Str(s) if s == r#"{"key": "s3cret"}"#));
        let AttrValue::Expr(e) = &p.attrs[2].value else {
            panic!()
        };
        assert!(matches!(&e.kind, ExprKind::Name(n) if n == "continue"));
        let Decl::Sub(s) = &m.decls[2] else { panic!() };
        let StmtKind::Expr(e) = &s.body[0].kind else {
            panic!()
        };
        let ExprKind::Call { func, args } = &e.kind else {
            panic!()
        };
        assert_eq!(func.name, "plugin.request");
        assert!(matches!(&args[0].value.kind, ExprKind::Name(n) if n == "auth"));
    }

    #[test]
    fn plugin_is_only_a_keyword_at_the_top_level() {
        // A backend, a sub and a header may still be called `plugin`.
        parse(r#"backend plugin { .host = "x"; } sub plugin { set req.http.plugin = "1"; }"#)
            .expect("parses");
        let e = parse("plugin { .path = \"x\"; }").unwrap_err();
        assert!(
            e[0].message.contains("expected an identifier"),
            "{}",
            e[0].message
        );
    }

    #[test]
    fn literals() {
        let m = parse("sub x { set beresp.ttl = 1.5h; set a.b = 64KB; set c = -3; }").unwrap();
        let Decl::Sub(s) = &m.decls[0] else { panic!() };
        let StmtKind::Set { value, .. } = &s.body[0].kind else {
            panic!()
        };
        assert!(matches!(value.kind, ExprKind::Duration(d) if d == 5400.0));
        let StmtKind::Set { value, .. } = &s.body[1].kind else {
            panic!()
        };
        assert!(matches!(value.kind, ExprKind::Bytes(65536)));
        let StmtKind::Set { value, .. } = &s.body[2].kind else {
            panic!()
        };
        assert!(matches!(value.kind, ExprKind::Int(-3)));
    }

    #[test]
    fn missing_semicolon_says_so() {
        let e = parse("sub vcl_recv {\n  set req.url = \"/\"\n}\n").unwrap_err();
        assert!(e[0].message.contains("`;`"), "{}", e[0].message);
    }
}
