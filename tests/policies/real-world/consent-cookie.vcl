# Pattern: overriding one of Varnish 7's builtin helper subs. A GDPR consent cookie should not
# make pages uncacheable, so `vcl_req_cookie` (called by the builtin vcl_recv) looks the
# request up when the consent cookie is the only one, and otherwise falls through to the
# builtin body (pass on any Cookie). Same for Set-Cookie in `vcl_beresp_cookie`.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_req_cookie {
    if (req.http.Cookie ~ "^\s*cookie_consent=[a-z]+\s*$") {
        return (hash);
    }
}

sub vcl_beresp_cookie {
    if (beresp.http.Set-Cookie ~ "^cookie_consent=") {
        unset beresp.http.Set-Cookie;
    }
}

sub vcl_hash {
    if (req.http.Cookie) {
        hash_data(req.http.Cookie);
    }
}
