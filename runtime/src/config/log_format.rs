//! `--log-format`: the names (`compact`, `json`, `ncsa`/`combined`) and varnishncsa's format
//! strings (`'%h %t "%r" %s %{Varnish:handling}x'`), parsed once into [`LogField`]s.

use std::sync::Arc;

use super::LogFormat;

/// varnishncsa's default format: Apache's combined log format.
pub const NCSA_COMBINED: &str = r#"%h %l %u %t "%r" %s %b "%{Referer}i" "%{User-agent}i""#;

/// The codes a format string may use, for error messages.
const CODES: &str = "%b %D %H %h %I %l %m %q %r %s %t %T %U %u %{Header}i %{Header}o \
                     %{Varnish:handling}x %{Varnish:vxid}x %{Varnish:backend}x %%";

/// One piece of an NCSA line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogField {
    Text(String),
    /// `%h`: the client address.
    Client,
    /// `%l`, `%u`: remote log name and user, always `-`.
    Dash,
    /// `%t`: `[01/Dec/2026:11:20:00 +0000]`.
    Time,
    /// `%r`: `GET http://HOST/path?query HTTP/1.1`.
    RequestLine,
    /// `%s`
    Status,
    /// `%b`: response body bytes, `-` when unknown.
    Bytes,
    /// `%m`
    Method,
    /// `%U`: the path.
    Path,
    /// `%q`: `?query`, or nothing.
    Query,
    /// `%H`: `HTTP/1.1`.
    Protocol,
    /// `%D`: microseconds taken.
    Micros,
    /// `%T`: whole seconds taken.
    Seconds,
    /// `%{NAME}i`: a request field (Host, User-Agent and Referer are what is kept).
    RequestField(String),
    /// `%{Varnish:handling}x`: hit, miss, pass, synth, ...
    Handling,
    /// `%{Varnish:vxid}x`: the request id (`req.xid`).
    Xid,
    /// `%{Varnish:backend}x`: the backend's name, `-` for hits.
    Backend,
    /// `%I`: the TLS version, `-` for plain HTTP (not varnishncsa's; its `%I` is bytes in).
    Tls,
}

/// A parsed format string with its text.
#[derive(Debug, PartialEq, Eq)]
pub struct NcsaFormat {
    pub text: String,
    pub fields: Vec<LogField>,
}

/// Parses `--log-format`: `compact`, `json`, `ncsa` or `combined`, or a format string with
/// `%` codes.
pub fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    match text {
        "compact" => Ok(LogFormat::Compact),
        "json" => Ok(LogFormat::Json),
        "ncsa" | "combined" => Ok(LogFormat::Ncsa(Arc::new(
            parse_ncsa(NCSA_COMBINED).expect("the default format parses"),
        ))),
        custom if custom.contains('%') => Ok(LogFormat::Ncsa(Arc::new(parse_ncsa(custom)?))),
        other => Err(format!(
            "`{other}` is not a log format; accepted: compact, json, ncsa (combined), or a \
             varnishncsa format string with the codes {CODES}"
        )),
    }
}

fn parse_ncsa(text: &str) -> Result<NcsaFormat, String> {
    let mut fields = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            continue;
        }
        let field = match chars.next() {
            Some('%') => {
                literal.push('%');
                continue;
            }
            Some('h') => LogField::Client,
            Some('l') | Some('u') => LogField::Dash,
            Some('t') => LogField::Time,
            Some('r') => LogField::RequestLine,
            Some('s') => LogField::Status,
            Some('b') => LogField::Bytes,
            Some('m') => LogField::Method,
            Some('U') => LogField::Path,
            Some('q') => LogField::Query,
            Some('H') => LogField::Protocol,
            Some('D') => LogField::Micros,
            Some('T') => LogField::Seconds,
            Some('I') => LogField::Tls,
            Some('{') => {
                let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                match (inner.as_str(), chars.next()) {
                    ("Varnish:handling", Some('x')) => LogField::Handling,
                    ("Varnish:vxid", Some('x')) => LogField::Xid,
                    ("Varnish:backend", Some('x')) => LogField::Backend,
                    (name, Some('i')) if is_kept_field(name) => {
                        LogField::RequestField(name.to_ascii_lowercase())
                    }
                    (name, Some('i')) => {
                        return Err(format!(
                            "`%{{{name}}}i`: only the request's Host, User-Agent and Referer are \
                             kept for the log"
                        ))
                    }
                    (name, kind) => {
                        return Err(format!(
                            "`%{{{name}}}{}` is not a format code; accepted: {CODES}",
                            kind.map(String::from).unwrap_or_default()
                        ))
                    }
                }
            }
            Some(other) => return Err(format!("`%{other}` is not a format code; accepted: {CODES}")),
            None => return Err(format!("the format ends with a lone `%`; accepted: {CODES}")),
        };
        if !literal.is_empty() {
            fields.push(LogField::Text(std::mem::take(&mut literal)));
        }
        fields.push(field);
    }
    if !literal.is_empty() {
        fields.push(LogField::Text(literal));
    }
    Ok(NcsaFormat {
        text: text.to_string(),
        fields,
    })
}

fn is_kept_field(name: &str) -> bool {
    ["host", "user-agent", "referer"]
        .iter()
        .any(|kept| name.eq_ignore_ascii_case(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_strings_parse_into_fields() {
        let LogFormat::Ncsa(format) = parse_log_format("%h [%{Varnish:handling}x] %D%% %{host}i").unwrap()
        else {
            panic!("not ncsa")
        };
        assert_eq!(
            format.fields,
            [
                LogField::Client,
                LogField::Text(" [".into()),
                LogField::Handling,
                LogField::Text("] ".into()),
                LogField::Micros,
                LogField::Text("% ".into()),
                LogField::RequestField("host".into()),
            ]
        );
        assert!(matches!(parse_log_format("combined"), Ok(LogFormat::Ncsa(_))));
    }

    #[test]
    fn bad_format_strings_name_the_accepted_codes() {
        for (text, wanted) in [
            ("%h %Z", "`%Z` is not a format code; accepted: %b"),
            ("%h %", "lone `%`"),
            ("%{Cookie}i", "only the request's Host, User-Agent and Referer"),
            ("%{Varnish:time_firstbyte}x", "is not a format code"),
            ("apache", "accepted: compact, json, ncsa (combined)"),
        ] {
            let error = parse_log_format(text).unwrap_err();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }
}
