//! The ESI parser: a complete body to [`EsiInstructions`], as Varnish's `cache_esi_parse.c`
//! reads it (ESI 1.0, the subset Varnish implements). Pure: no I/O, no state between calls.
//!
//! What it understands: `<esi:include src="..." onerror="continue"/>` (a path, a path relative
//! to the page's URL, or `http://host/path`; `https://` is ignored, as Varnish does by
//! default), `<esi:remove>...</esi:remove>` (left out), `<!--esi ... -->` (the wrapper left
//! out, its content kept and parsed), `<esi:comment .../>` (left out). HTML comments and
//! CDATA sections pass as they are, their content unparsed. Like Varnish it does not stop at
//! malformed markup: a bad ESI tag is left out to its `>`, a problem is recorded, and parsing
//! goes on. A body whose first non-blank byte is not `<` is not XML and is not parsed; a body
//! without any ESI markup yields no instructions (it is served as it is).

use crate::cache::object::{EsiInclude, EsiInstructions, EsiStep};

/// What parsing a body found.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// `None`: nothing to do at delivery (not XML, or no ESI markup).
    pub instructions: Option<EsiInstructions>,
    /// Markup Varnish would log as `ESI_xmlerror`, with the offset where it was noticed.
    pub problems: Vec<(usize, &'static str)>,
}

/// Parses `body`, the body of the page at `url` (the path relative includes resolve against).
pub(crate) fn parse(body: &[u8], url: &str) -> Parsed {
    let first = body.iter().position(|&b| !is_lws(b));
    if first.is_none_or(|at| body[at] != b'<') {
        return Parsed {
            instructions: None,
            problems: Vec::new(),
        };
    }
    let mut parser = Parser {
        body,
        url,
        at: 0,
        mark: 0,
        steps: Vec::new(),
        problems: Vec::new(),
        removing: false,
        in_esi_comment: false,
        found: false,
    };
    parser.run();
    Parsed {
        instructions: parser.found.then_some(EsiInstructions(parser.steps)),
        problems: parser.problems,
    }
}

fn is_lws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':' || b >= 0x80
}

fn is_name(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit() || b == b'-' || b == b'.'
}

/// The ESI element a tag names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Element {
    Include,
    Remove,
    Comment,
}

/// A tag's attributes as far as the element uses them.
#[derive(Default)]
struct Attributes {
    src: Option<String>,
    continue_on_error: bool,
    /// `/>`
    empty: bool,
}

struct Parser<'a> {
    body: &'a [u8],
    url: &'a str,
    at: usize,
    /// Start of the bytes not yet kept or left out.
    mark: usize,
    steps: Vec<EsiStep>,
    problems: Vec<(usize, &'static str)>,
    /// Inside `<esi:remove>`: everything is left out.
    removing: bool,
    /// Inside `<!--esi`: its `-->` is left out.
    in_esi_comment: bool,
    /// Some ESI markup was seen: the body needs processing.
    found: bool,
}

impl Parser<'_> {
    fn rest(&self) -> &[u8] {
        &self.body[self.at..]
    }

    fn problem(&mut self, what: &'static str) {
        self.problems.push((self.at, what));
    }

    /// The bytes up to `end` are sent as they are (unless inside `<esi:remove>`).
    fn keep(&mut self, end: usize) {
        if end > self.mark && !self.removing {
            let range = self.mark as u64..end as u64;
            match self.steps.last_mut() {
                Some(EsiStep::Verbatim(last)) if last.end == range.start => last.end = range.end,
                _ => self.steps.push(EsiStep::Verbatim(range)),
            }
        }
        self.mark = end;
    }

    /// The bytes up to `end` are left out.
    fn leave_out(&mut self, end: usize) {
        self.mark = end;
    }

    /// Where `needle` next starts at or after `from`.
    fn find(&self, from: usize, needle: &[u8]) -> Option<usize> {
        self.body[from..]
            .windows(needle.len())
            .position(|window| window == needle)
            .map(|at| from + at)
    }

    fn run(&mut self) {
        while self.at < self.body.len() {
            let next_tag = self.find(self.at, b"<");
            if self.in_esi_comment {
                let end = self.find(self.at, b"-->");
                if let Some(end) = end.filter(|&end| next_tag.is_none_or(|tag| end < tag)) {
                    self.keep(end);
                    self.at = end + 3;
                    self.leave_out(self.at);
                    self.in_esi_comment = false;
                    continue;
                }
            }
            let Some(tag) = next_tag else {
                break;
            };
            self.keep(tag);
            self.at = tag + 1;
            self.start_tag(tag);
        }
        self.keep(self.body.len());
    }

    /// After a `<` at `tag`.
    fn start_tag(&mut self, tag: usize) {
        let rest = self.rest();
        if rest.starts_with(b"!--esi") {
            if self.removing {
                self.problem("ESI 1.0 Nested <!--esi element in <esi:remove>");
            }
            self.found = true;
            self.at += 6;
            self.leave_out(self.at);
            self.in_esi_comment = true;
        } else if rest.starts_with(b"!---->") {
            self.at += 6;
        } else if rest.starts_with(b"!--") {
            self.pass_until(b"-->");
        } else if rest.starts_with(b"![CDATA[") {
            self.pass_until(b"]]>");
        } else if rest.starts_with(b"/esi:") {
            self.at += 5;
            self.esi_tag(tag, true);
        } else if rest.starts_with(b"esi:") {
            self.at += 4;
            self.esi_tag(tag, false);
        } else {
            // Not ours: passed as it is to its `>`.
            self.at = self.find(self.at, b">").map_or(self.body.len(), |end| end + 1);
        }
    }

    /// A comment or CDATA section: passed as it is, unparsed, through `end`.
    fn pass_until(&mut self, end: &[u8]) {
        self.at = match self.find(self.at, end) {
            Some(at) => at + end.len(),
            None => {
                self.problem("VEP ended inside a tag");
                self.body.len()
            }
        };
    }

    /// An ESI tag that started at `tag`, after `<esi:` (or `</esi:`, `end_tag`): always left
    /// out, whatever it does.
    fn esi_tag(&mut self, tag: usize, end_tag: bool) {
        self.found = true;
        self.leave_out(tag);
        let rest = self.rest();
        let element = [
            (&b"include"[..], Element::Include),
            (b"remove", Element::Remove),
            (b"comment", Element::Comment),
        ]
        .into_iter()
        .find(|(name, _)| rest.starts_with(name));
        let Some((name, element)) = element else {
            self.problem("ESI 1.0 <esi:bogus> element");
            return self.tag_error();
        };
        self.at += name.len();
        let refused = match element {
            Element::Include if self.removing => Some("ESI 1.0 <esi:include> element nested in <esi:remove>"),
            Element::Include if end_tag => Some("ESI 1.0 </esi:include> illegal end-tag"),
            Element::Comment if self.removing => Some("ESI 1.0 <esi:comment> element nested in <esi:remove>"),
            Element::Comment if end_tag => Some("ESI 1.0 </esi:comment> illegal end-tag"),
            _ => None,
        };
        if let Some(refused) = refused {
            self.problem(refused);
            return self.tag_error();
        }
        let Some(attributes) = self.attributes(element) else {
            return self.tag_error();
        };
        self.leave_out(self.at);
        match element {
            Element::Include => self.include(attributes),
            Element::Remove => self.remove(attributes.empty, end_tag),
            Element::Comment => {
                if !attributes.empty {
                    self.problem("ESI 1.0 <esi:comment> needs final '/'");
                }
            }
        }
    }

    /// A malformed ESI tag: left out through its `>`.
    fn tag_error(&mut self) {
        self.at = self.find(self.at, b">").map_or_else(
            || {
                self.problems.push((self.body.len(), "VEP ended inside a tag"));
                self.body.len()
            },
            |end| end + 1,
        );
        self.leave_out(self.at);
    }

    /// The attributes of a tag through its `>` (`None`: malformed, problem recorded, `at` where
    /// it was noticed). Only `<esi:include>` reads any (`src`, `onerror`); the others' are
    /// skipped.
    fn attributes(&mut self, element: Element) -> Option<Attributes> {
        let mut attributes = Attributes::default();
        loop {
            let mut spaced = false;
            while self.at < self.body.len() && is_lws(self.body[self.at]) {
                self.at += 1;
                spaced = true;
            }
            if self.rest().starts_with(b"/") {
                self.at += 1;
                attributes.empty = true;
                if !self.rest().starts_with(b">") {
                    self.problem("XML 1.0 '>' does not follow '/' in tag");
                    return None;
                }
            }
            match self.rest().first() {
                // `tag_error` says the body ended inside the tag.
                None => return None,
                Some(b'>') => {
                    self.at += 1;
                    return Some(attributes);
                }
                Some(&b) if spaced && is_name_start(b) => {}
                Some(_) => {
                    self.problem("XML 1.0 Illegal attribute start char");
                    return None;
                }
            }
            let name_end = self.at + self.rest().iter().take_while(|&&b| is_name(b)).count();
            let name = &self.body[self.at..name_end];
            let wanted = match (element, name) {
                (Element::Include, b"src") => Some(true),
                (Element::Include, b"onerror") => Some(false),
                _ => None,
            };
            self.at = name_end;
            match self.rest().first() {
                Some(b'=') => self.at += 1,
                // An attribute without a value.
                Some(&b) if wanted.is_none() && (b == b'>' || b == b'/' || is_lws(b)) => continue,
                _ => {
                    self.problem("XML 1.0 Illegal attr char");
                    return None;
                }
            }
            let value = self.attribute_value()?;
            match wanted {
                Some(true) if attributes.src.is_some() => {
                    self.problem("ESI 1.0 <esi:include> has multiple src= attributes");
                    return None;
                }
                Some(true) if value.iter().any(|&b| is_lws(b)) => {
                    self.problem("ESI 1.0 <esi:include> has whitespace in src= attribute");
                    return None;
                }
                Some(true) => attributes.src = Some(String::from_utf8_lossy(value).into_owned()),
                Some(false) => attributes.continue_on_error = value == b"continue",
                None => {}
            }
        }
    }

    /// A value after `=`: quoted with `"` or `'`, or up to the next blank.
    fn attribute_value(&mut self) -> Option<&[u8]> {
        let delimiter = match self.rest().first() {
            Some(&quote @ (b'"' | b'\'')) => {
                self.at += 1;
                Some(quote)
            }
            Some(&b) if !is_lws(b) => None,
            _ => {
                self.problem("XML 1.0 Illegal attribute delimiter");
                return None;
            }
        };
        let start = self.at;
        let ends = |b: u8| b == b'>' || delimiter.map_or(is_lws(b), |quote| b == quote);
        let length = self.rest().iter().take_while(|&&b| !ends(b)).count();
        self.at += length;
        match self.rest().first() {
            None => None,
            Some(b'>') => {
                self.problem("XML 1.0 Missing end attribute delimiter");
                None
            }
            Some(_) => {
                // The closing quote (an unquoted value's blank is read as a separator).
                if delimiter.is_some() {
                    self.at += 1;
                }
                Some(&self.body[start..start + length])
            }
        }
    }

    fn remove(&mut self, empty: bool, end_tag: bool) {
        if empty {
            self.problem("ESI 1.0 <esi:remove/> not legal");
        } else if self.removing && !end_tag {
            self.problem("ESI 1.0 <esi:remove> already open");
        } else if !self.removing && end_tag {
            self.problem("ESI 1.0 <esi:remove> not open");
        } else {
            self.removing = !end_tag;
        }
    }

    fn include(&mut self, attributes: Attributes) {
        if !attributes.empty {
            self.problem("ESI 1.0 <esi:include> lacks final '/'");
        }
        let Some(src) = attributes.src else {
            self.problem("ESI 1.0 <esi:include> lacks src attr");
            return;
        };
        match resolve(&src, self.url) {
            Ok((host, path)) => self.steps.push(EsiStep::Include(EsiInclude {
                url: unescape(path).into(),
                host: host.map(Into::into),
                continue_on_error: attributes.continue_on_error,
            })),
            Err(problem) => self.problem(problem),
        }
    }
}

/// `src` as the `Host` to ask (`None`: the page's) and the path, as Varnish resolves it: an
/// `http://` URL names its host, a path is taken as it is, anything else is relative to the
/// page's directory.
fn resolve<'a>(
    src: &'a str,
    page: &str,
) -> Result<(Option<&'a str>, std::borrow::Cow<'a, str>), &'static str> {
    if let Some(rest) = src.strip_prefix("http://").filter(|rest| !rest.is_empty()) {
        let slash = rest.find('/').ok_or("ESI 1.0 <esi:include> invalid src= URL")?;
        return Ok((Some(&rest[..slash]), rest[slash..].into()));
    }
    if src.len() > 8 && src.starts_with("https://") {
        return Err("ESI 1.0 <esi:include> with https:// ignored");
    }
    if src.starts_with('/') {
        return Ok((None, src.into()));
    }
    let path = page.split('?').next().unwrap_or(page);
    let directory = &path[..path.rfind('/').unwrap_or(0)];
    Ok((None, format!("{directory}/{src}").into()))
}

/// The XML entities Varnish decodes in a `src`.
fn unescape(path: std::borrow::Cow<'_, str>) -> String {
    if !path.contains('&') {
        return path.into_owned();
    }
    let mut out = String::with_capacity(path.len());
    let mut rest = &*path;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let entity = [
            ("&apos;", '\''),
            ("&quot;", '"'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&amp;", '&'),
        ]
        .into_iter()
        .find(|(name, _)| rest.starts_with(name));
        match entity {
            Some((name, decoded)) => {
                out.push(decoded);
                rest = &rest[name.len()..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The instructions as text, for tests: verbatim bytes as they are, includes as
/// `[host|url|continue]`.
#[cfg(test)]
fn render(body: &[u8], instructions: &EsiInstructions) -> String {
    let mut out = String::new();
    for step in &instructions.0 {
        match step {
            EsiStep::Verbatim(range) => {
                let std::ops::Range { start, end } = range.clone();
                out.push_str(&String::from_utf8_lossy(&body[start as usize..end as usize]));
            }
            EsiStep::Include(include) => out.push_str(&format!(
                "[{}|{}|{}]",
                include.host.as_deref().unwrap_or(""),
                include.url,
                if include.continue_on_error {
                    "continue"
                } else {
                    "abort"
                }
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assembled(body: &str, url: &str) -> (String, Vec<&'static str>) {
        let parsed = parse(body.as_bytes(), url);
        let problems = parsed.problems.iter().map(|(_, what)| *what).collect();
        let text = parsed
            .instructions
            .as_ref()
            .map(|instructions| render(body.as_bytes(), instructions))
            .expect("the body holds ESI");
        (text, problems)
    }

    #[test]
    fn include_with_a_path_becomes_an_include_between_verbatim_bytes() {
        let (text, problems) = assembled(r#"<p>a<esi:include src="/frag?x=1"/>b</p>"#, "/page");
        assert_eq!(text, "<p>a[|/frag?x=1|abort]b</p>");
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn relative_src_resolves_against_the_page_directory_and_ignores_its_query() {
        let (text, _) = assembled(r#"<x><esi:include src="frag.html"/></x>"#, "/a/b/page.html?q=/z");
        assert_eq!(text, "<x>[|/a/b/frag.html|abort]</x>");
    }

    #[test]
    fn same_host_absolute_src_names_the_host() {
        let (text, _) = assembled(
            r#"<x><esi:include src="http://example.com/f" onerror="continue"/></x>"#,
            "/",
        );
        assert_eq!(text, "<x>[example.com|/f|continue]</x>");
    }

    #[test]
    fn https_src_is_ignored_as_varnish_does_by_default() {
        let (text, problems) = assembled(r#"<x><esi:include src="https://example.com/f"/></x>"#, "/");
        assert_eq!(text, "<x></x>");
        assert_eq!(problems, ["ESI 1.0 <esi:include> with https:// ignored"]);
    }

    #[test]
    fn onerror_other_than_continue_aborts() {
        let (text, _) = assembled(r#"<x><esi:include onerror='stop' src='/f'/></x>"#, "/");
        assert_eq!(text, "<x>[|/f|abort]</x>");
    }

    #[test]
    fn unknown_include_attributes_are_skipped() {
        let (text, problems) = assembled(r#"<x><esi:include alt="/b" src="/f" dca=none /></x>"#, "/");
        assert_eq!(text, "<x>[|/f|abort]</x>");
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn entities_in_src_are_decoded() {
        let (text, _) = assembled(r#"<x><esi:include src="/f?a=1&amp;b=&lt;2&gt;&x"/></x>"#, "/");
        assert_eq!(text, "<x>[|/f?a=1&b=<2>&x|abort]</x>");
    }

    #[test]
    fn remove_leaves_its_content_out() {
        let (text, problems) = assembled("<a>1<esi:remove><b>fallback</b></esi:remove>2</a>", "/");
        assert_eq!(text, "<a>12</a>");
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn esi_comment_keeps_and_parses_its_content() {
        let (text, _) = assembled(r#"<a><!--esi <p><esi:include src="/f"/></p> -->z</a>"#, "/");
        assert_eq!(text, "<a> <p>[|/f|abort]</p> z</a>");
    }

    #[test]
    fn esi_comment_element_is_left_out() {
        let (text, problems) = assembled(r#"<a>1<esi:comment text="note"/>2</a>"#, "/");
        assert_eq!(text, "<a>12</a>");
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn html_comments_and_cdata_pass_unparsed() {
        let body = r#"<a><!-- <esi:include src="/no"/> --><![CDATA[<esi:include src="/no"/>]]><esi:include src="/yes"/></a>"#;
        let (text, _) = assembled(body, "/");
        assert_eq!(
            text,
            r#"<a><!-- <esi:include src="/no"/> --><![CDATA[<esi:include src="/no"/>]]>[|/yes|abort]</a>"#
        );
    }

    #[test]
    fn include_without_final_slash_is_included_with_a_warning() {
        let (text, problems) = assembled(r#"<a><esi:include src="/f"></a>"#, "/");
        assert_eq!(text, "<a>[|/f|abort]</a>");
        assert_eq!(problems, ["ESI 1.0 <esi:include> lacks final '/'"]);
    }

    #[test]
    fn malformed_esi_tags_are_left_out_and_reported() {
        let cases = [
            (
                r#"<a><esi:include/>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:include> lacks src attr",
            ),
            (
                r#"<a><esi:bogus src="/f"/>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:bogus> element",
            ),
            (
                r#"<a><esi:include src="/f" src="/g"/>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:include> has multiple src= attributes",
            ),
            (
                r#"<a><esi:include src="/f"/ >b</a>"#,
                "<a>b</a>",
                "XML 1.0 '>' does not follow '/' in tag",
            ),
            (
                r#"<a><esi:include src="/f>b</a>"#,
                "<a>b</a>",
                "XML 1.0 Missing end attribute delimiter",
            ),
            (
                r#"<a></esi:include>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 </esi:include> illegal end-tag",
            ),
            (
                r#"<a><esi:comment>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:comment> needs final '/'",
            ),
            (
                r#"<a></esi:remove>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:remove> not open",
            ),
            (
                r#"<a><esi:remove><esi:include src="/f"/></esi:remove>b</a>"#,
                "<a>b</a>",
                "ESI 1.0 <esi:include> element nested in <esi:remove>",
            ),
        ];
        for (body, wanted, problem) in cases {
            let (text, problems) = assembled(body, "/");
            assert_eq!(text, wanted, "{body}");
            assert_eq!(problems, [problem], "{body}");
        }
    }

    #[test]
    fn unterminated_esi_tag_is_left_out_to_the_end() {
        let (text, problems) = assembled(r#"<a>x<esi:include src="/f""#, "/");
        assert_eq!(text, "<a>x");
        assert_eq!(problems, ["VEP ended inside a tag"]);
    }

    #[test]
    fn a_body_that_is_not_xml_or_has_no_esi_is_not_processed() {
        assert!(parse(br#"{"a": "<esi:include src=\"/f\"/>"}"#, "/")
            .instructions
            .is_none());
        assert!(parse(b"<html><p>plain</p></html>", "/").instructions.is_none());
        assert!(parse(b"", "/").instructions.is_none());
    }

    #[test]
    fn leading_blanks_are_kept_and_other_tags_pass() {
        let (text, _) = assembled("\n  <div class=\"a>\"><esi:include src=\"/f\"/></div>", "/");
        assert_eq!(text, "\n  <div class=\"a>\">[|/f|abort]</div>");
    }
}
