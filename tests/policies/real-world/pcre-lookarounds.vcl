# Pattern: PCRE-only regexes as PrestaShop, MediaWiki and Wikimedia configurations write them:
# a negative look-ahead to cache everything but the back office, a look-behind to strip
# tracking parameters, and a back-reference in a pattern to catch doubled path segments.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    # Everything outside /admin-dev/ and the order tunnel is cacheable for guests.
    if (req.url ~ "^/(?!admin-dev/|order|module/.*/validation)" && !req.http.Cookie) {
        unset req.http.Authorization;
    }
    # Drop utm_* and fbclid, keeping the other parameters.
    set req.url = regsuball(req.url, "(?<=[?&])(utm_[a-z]+|fbclid|gclid)=[^&]*&?", "");
    set req.url = regsub(req.url, "[?&]$", "");
    # /wiki/wiki/Page -> /wiki/Page
    if (req.url ~ "^/([a-z]+)/\1/") {
        return (synth(301, "Doubled path"));
    }
}

sub vcl_synth {
    if (resp.status == 301) {
        set resp.http.Location = regsub(req.url, "^/([a-z]+)/\1/", "/\1/");
        return (deliver);
    }
}
