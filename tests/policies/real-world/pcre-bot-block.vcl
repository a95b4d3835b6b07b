# Pattern: PCRE look-arounds and atomic groups in a bot filter: any User-Agent saying "bot"
# is refused unless it is a search engine (negative look-ahead), a doubled slash is folded
# with a back-reference, and WordPress xmlrpc probes are dropped with an atomic group.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (req.http.User-Agent ~ "(?i)^(?!.*(googlebot|bingbot|duckduckbot)).*(bot|crawler|spider)") {
        return (synth(403, "Bots not welcome"));
    }
    if (req.url ~ "^/(?>xmlrpc|wp-login)\.php") {
        return (synth(404, "Not found"));
    }
    if (req.url ~ "(/)\1") {
        set req.url = regsuball(req.url, "/{2,}", "/");
    }
    # Strip a trailing index.html, not any other .html (look-behind).
    set req.url = regsub(req.url, "(?<=/)index\.html$", "");
}

sub vcl_deliver {
    if (req.http.User-Agent ~ "(?i)(?<!not)googlebot") {
        set resp.http.X-Robots-Seen = "search";
    }
}
