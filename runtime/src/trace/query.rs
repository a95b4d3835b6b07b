//! varnishlog's `-q` queries, the subset edgecache reads: a request is shown when its records
//! satisfy the query.
//!
//! ```text
//! query    := and ("or" and)*
//! and      := unary ("and" unary)*
//! unary    := "not" unary | "(" query ")" | test
//! test     := TAG [":" PREFIX] ["[" FIELD "]"] [OPERATOR OPERAND]
//! ```
//!
//! A test holds when any record of the tag does (client and backend sides alike). `TAG` alone:
//! the request has such a record. `:PREFIX` keeps the records whose value starts with
//! `PREFIX:` (any case; `ReqHeader:Host`, `Timestamp:Resp`) and compares what follows it;
//! `[FIELD]` compares the value's FIELDth whitespace-separated field (from 1). Operators:
//! `==`, `!=`, `<`, `<=`, `>`, `>=` compare numbers (a value that is not one never holds);
//! `eq`, `ne` compare strings; `~`, `!~` match a regex. Operands are numbers or strings in
//! double or single quotes. A `VCL_return`'s value is its action (`pass`); the place that
//! decided it is not part of the value.

use regex::Regex;

use super::{Record, Transaction};

/// The tags edgecache records (varnishlog's names); a query naming another is refused.
pub const TAGS: &[&str] = &[
    "Begin",
    "End",
    "Link",
    "ReqStart",
    "ReqMethod",
    "ReqURL",
    "ReqProtocol",
    "ReqHeader",
    "VCL_call",
    "VCL_return",
    "Hit",
    "HitPass",
    "HitMiss",
    "RespStatus",
    "RespReason",
    "RespHeader",
    "Timestamp",
    "BereqMethod",
    "BereqURL",
    "BackendOpen",
    "BerespStatus",
    "BerespReason",
    "FetchError",
];

/// A query that does not parse, with the column (from 1) where it went wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("cannot parse the query at column {column}: {message}")]
pub struct QueryError {
    pub column: usize,
    pub message: String,
}

/// A parsed query.
#[derive(Debug)]
pub struct Query(Node);

#[derive(Debug)]
enum Node {
    Or(Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Test(Test),
}

#[derive(Debug)]
struct Test {
    tag: &'static str,
    prefix: Option<String>,
    field: Option<usize>,
    compare: Option<Compare>,
}

#[derive(Debug)]
enum Compare {
    Number(NumberOp, f64),
    Eq(String),
    Ne(String),
    Match(Regex),
    NoMatch(Regex),
}

#[derive(Debug, Clone, Copy)]
enum NumberOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Query {
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let tokens = tokens(text)?;
        let mut parser = Parser {
            tokens,
            at: 0,
            end: text.chars().count() + 1,
        };
        if parser.tokens.is_empty() {
            return Err(QueryError {
                column: 1,
                message: "the query is empty; write e.g. ReqURL ~ \"^/api\"".to_string(),
            });
        }
        let node = parser.or()?;
        match parser.peek() {
            None => Ok(Query(node)),
            Some(token) => {
                Err(token.error(format!("expected `and`, `or` or the end, found `{}`", token.text)))
            }
        }
    }

    /// Whether the request's records satisfy the query.
    pub fn matches(&self, transaction: &Transaction) -> bool {
        self.0.holds(&transaction.records)
    }
}

impl Node {
    fn holds(&self, records: &[Record]) -> bool {
        match self {
            Node::Or(a, b) => a.holds(records) || b.holds(records),
            Node::And(a, b) => a.holds(records) && b.holds(records),
            Node::Not(a) => !a.holds(records),
            Node::Test(test) => records.iter().any(|record| test.holds(record)),
        }
    }
}

impl Test {
    fn holds(&self, record: &Record) -> bool {
        if record.tag != self.tag {
            return false;
        }
        let mut value = record.value.as_str();
        if let Some(prefix) = &self.prefix {
            let Some((name, rest)) = value.split_once(':') else {
                return false;
            };
            if !name.trim().eq_ignore_ascii_case(prefix) {
                return false;
            }
            value = rest.trim();
        }
        if let Some(field) = self.field {
            let Some(nth) = value.split_whitespace().nth(field - 1) else {
                return false;
            };
            value = nth;
        }
        match &self.compare {
            None => true,
            Some(Compare::Number(op, number)) => value.trim().parse::<f64>().is_ok_and(|v| match op {
                NumberOp::Eq => v == *number,
                NumberOp::Ne => v != *number,
                NumberOp::Lt => v < *number,
                NumberOp::Le => v <= *number,
                NumberOp::Gt => v > *number,
                NumberOp::Ge => v >= *number,
            }),
            Some(Compare::Eq(s)) => value == s,
            Some(Compare::Ne(s)) => value != s,
            Some(Compare::Match(re)) => re.is_match(value),
            Some(Compare::NoMatch(re)) => !re.is_match(value),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Word,
    Str(String),
    Punct,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    text: String,
    column: usize,
}

impl Token {
    fn error(&self, message: String) -> QueryError {
        QueryError {
            column: self.column,
            message,
        }
    }

    fn is(&self, text: &str) -> bool {
        self.kind != Kind::Word && self.text == text
            || self.kind == Kind::Word && self.text.eq_ignore_ascii_case(text)
    }
}

const OPERATORS: &str = "`==`, `!=`, `<`, `<=`, `>`, `>=`, `eq`, `ne`, `~` or `!~`";

fn tokens(text: &str) -> Result<Vec<Token>, QueryError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut value = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(QueryError {
                            column,
                            message: format!("this string has no closing {c}"),
                        })
                    }
                    Some('\\') if chars.get(i + 1).is_some_and(|n| *n == c || *n == '\\') => {
                        value.push(chars[i + 1]);
                        i += 2;
                    }
                    Some(&n) if n == c => {
                        i += 1;
                        break;
                    }
                    Some(&n) => {
                        value.push(n);
                        i += 1;
                    }
                }
            }
            out.push(Token {
                kind: Kind::Str(value),
                text: chars[column - 1..i].iter().collect(),
                column,
            });
        } else if c.is_alphanumeric() || "_.-+".contains(c) {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || "_.-+".contains(chars[i])) {
                i += 1;
            }
            out.push(Token {
                kind: Kind::Word,
                text: chars[start..i].iter().collect(),
                column,
            });
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let text = if ["==", "!=", "<=", ">=", "!~"].contains(&two.as_str()) {
                two
            } else if "<>~()[]:".contains(c) {
                c.to_string()
            } else {
                return Err(QueryError {
                    column,
                    message: format!("unexpected `{c}`; operators are {OPERATORS}"),
                });
            };
            i += text.chars().count();
            out.push(Token {
                kind: Kind::Punct,
                text,
                column,
            });
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// The column just past the query, for "ended too early".
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self, wanted: &str) -> Result<Token, QueryError> {
        let token = self.tokens.get(self.at).cloned().ok_or_else(|| QueryError {
            column: self.end,
            message: format!("the query ends where {wanted} was expected"),
        })?;
        self.at += 1;
        Ok(token)
    }

    fn eat(&mut self, text: &str) -> bool {
        let found = self.peek().is_some_and(|token| token.is(text));
        self.at += usize::from(found);
        found
    }

    fn or(&mut self) -> Result<Node, QueryError> {
        let mut node = self.and()?;
        while self.eat("or") {
            node = Node::Or(Box::new(node), Box::new(self.and()?));
        }
        Ok(node)
    }

    fn and(&mut self) -> Result<Node, QueryError> {
        let mut node = self.unary()?;
        while self.eat("and") {
            node = Node::And(Box::new(node), Box::new(self.unary()?));
        }
        Ok(node)
    }

    fn unary(&mut self) -> Result<Node, QueryError> {
        if self.eat("not") {
            return Ok(Node::Not(Box::new(self.unary()?)));
        }
        if self.eat("(") {
            let node = self.or()?;
            let close = self.next("`)`")?;
            if !close.is(")") {
                return Err(close.error(format!("expected `)`, found `{}`", close.text)));
            }
            return Ok(node);
        }
        self.test().map(Node::Test)
    }

    fn test(&mut self) -> Result<Test, QueryError> {
        let name = self.next("a tag (ReqURL, RespStatus, VCL_return, ...)")?;
        let tag = match TAGS
            .iter()
            .find(|tag| name.kind == Kind::Word && tag.eq_ignore_ascii_case(&name.text))
        {
            Some(tag) => *tag,
            None => {
                return Err(name.error(format!(
                    "`{}` is not a tag edgecache records; tags: {}",
                    name.text,
                    TAGS.join(", ")
                )))
            }
        };
        let mut test = Test {
            tag,
            prefix: None,
            field: None,
            compare: None,
        };
        if self.eat(":") {
            let prefix = self.next("a prefix after `:` (ReqHeader:Host)")?;
            if prefix.kind != Kind::Word {
                return Err(prefix.error(format!(
                    "expected a prefix after `{tag}:`, found `{}`",
                    prefix.text
                )));
            }
            test.prefix = Some(prefix.text);
        }
        if self.eat("[") {
            let field = self.next("a field number")?;
            test.field = match field.text.parse::<usize>() {
                Ok(n) if n > 0 && field.kind == Kind::Word => Some(n),
                _ => {
                    return Err(field.error(format!("expected a field number from 1, found `{}`", field.text)))
                }
            };
            let close = self.next("`]`")?;
            if !close.is("]") {
                return Err(close.error(format!("expected `]`, found `{}`", close.text)));
            }
        }
        let Some(op) = self.peek().cloned() else {
            return Ok(test);
        };
        let number_op = match op.text.to_ascii_lowercase().as_str() {
            "==" => Some(NumberOp::Eq),
            "!=" => Some(NumberOp::Ne),
            "<" => Some(NumberOp::Lt),
            "<=" => Some(NumberOp::Le),
            ">" => Some(NumberOp::Gt),
            ">=" => Some(NumberOp::Ge),
            "eq" | "ne" | "~" | "!~" => None,
            // `and`, `or`, `)`: the test was the tag alone.
            _ => return Ok(test),
        };
        self.at += 1;
        let operand = self.next(&format!("a value after `{}`", op.text))?;
        test.compare = Some(match (number_op, &operand.kind) {
            (Some(number_op), Kind::Word) => match operand.text.parse::<f64>() {
                Ok(number) => Compare::Number(number_op, number),
                Err(_) => {
                    return Err(operand.error(format!(
                        "`{}` compares numbers; `{}` is not one (strings compare with eq, ne, ~)",
                        op.text, operand.text
                    )))
                }
            },
            (Some(_), _) => {
                return Err(operand.error(format!(
                    "`{}` compares numbers; for strings use eq, ne or ~",
                    op.text
                )))
            }
            (None, Kind::Punct) => {
                return Err(operand.error(format!(
                    "expected a string after `{}`, found `{}`",
                    op.text, operand.text
                )))
            }
            (None, kind) => {
                let s = match kind {
                    Kind::Str(s) => s.clone(),
                    _ => operand.text.clone(),
                };
                match op.text.to_ascii_lowercase().as_str() {
                    "eq" => Compare::Eq(s),
                    "ne" => Compare::Ne(s),
                    matching => {
                        let regex =
                            Regex::new(&s).map_err(|error| operand.error(format!("not a regex: {error}")))?;
                        if matching == "~" {
                            Compare::Match(regex)
                        } else {
                            Compare::NoMatch(regex)
                        }
                    }
                }
            }
        });
        Ok(test)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Side;

    fn request(records: &[(&'static str, &str)]) -> Transaction {
        Transaction {
            xid: 1,
            records: records
                .iter()
                .map(|(tag, value)| Record {
                    side: Side::Client,
                    tag,
                    value: value.to_string(),
                    note: None,
                })
                .collect(),
        }
    }

    fn holds(query: &str, records: &[(&'static str, &str)]) -> bool {
        Query::parse(query)
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .matches(&request(records))
    }

    #[test]
    fn varnishlog_queries_select_requests() {
        let api_503 = [
            ("ReqURL", "/api/users"),
            ("ReqHeader", "Host: example.com"),
            ("VCL_return", "pass"),
            ("RespStatus", "503"),
            ("Timestamp", "Resp: 1700000000.000000 0.250000 0.001000"),
        ];
        let table = [
            (r#"ReqURL ~ "^/api""#, true),
            (r#"ReqURL ~ "^/static""#, false),
            (r#"ReqURL !~ '^/static'"#, true),
            ("RespStatus >= 500", true),
            ("RespStatus < 500", false),
            ("RespStatus == 503 and ReqURL eq \"/api/users\"", true),
            ("RespStatus == 200 or VCL_return eq \"pass\"", true),
            ("RespStatus == 200 or VCL_return eq \"hash\"", false),
            ("not RespStatus == 200", true),
            ("(RespStatus == 200 or RespStatus == 503) and ReqURL", true),
            ("Hit", false),
            ("ReqHeader:host eq \"example.com\"", true),
            ("Timestamp:Resp[2] > 0.2", true),
            ("Timestamp:Resp[2] > 1", false),
            ("VCL_return ne \"pass\"", false),
            ("reqURL ~ \"users$\"", true),
        ];
        for (query, expected) in table {
            assert_eq!(holds(query, &api_503), expected, "{query}");
        }
    }

    #[test]
    fn a_query_that_does_not_parse_names_its_column() {
        let table = [
            ("", 1, "the query is empty"),
            ("ReqUrl = 5", 8, "unexpected `=`"),
            ("ReqURI ~ \"^/\"", 1, "`ReqURI` is not a tag edgecache records"),
            (
                "ReqURL ~",
                9,
                "the query ends where a value after `~` was expected",
            ),
            ("RespStatus >= \"500\"", 15, "`>=` compares numbers"),
            ("RespStatus >= high", 15, "`high` is not one"),
            ("ReqURL ~ \"(\"", 10, "not a regex"),
            ("ReqURL ~ \"^/api", 10, "this string has no closing \""),
            ("(RespStatus == 1", 17, "the query ends where `)` was expected"),
            (
                "RespStatus == 1 ReqURL",
                17,
                "expected `and`, `or` or the end, found `ReqURL`",
            ),
            ("Timestamp[0] > 1", 11, "expected a field number from 1"),
        ];
        for (query, column, message) in table {
            let error = Query::parse(query).expect_err(query);
            assert_eq!(error.column, column, "{query}: {error}");
            assert!(error.message.contains(message), "{query}: {error}");
        }
    }
}
