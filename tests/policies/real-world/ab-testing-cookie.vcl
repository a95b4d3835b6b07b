# Pattern: A/B testing with vmod cookie: every cookie but the experiment's dropped with
# cookie.keep, a new visitor assigned a group with std.random, the group hashed so both
# variants are cached, and the group handed back as a cookie.
vcl 4.1;

import std;
import cookie;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    cookie.parse(req.http.Cookie);
    cookie.keep("ab_group");
    if (!cookie.isset("ab_group")) {
        if (std.random(0, 100) < 50) {
            cookie.set("ab_group", "a");
        } else {
            cookie.set("ab_group", "b");
        }
        set req.http.X-AB-New = "1";
    }
    set req.http.X-AB = cookie.get("ab_group");
    unset req.http.Cookie;
}

sub vcl_hash {
    hash_data(req.http.X-AB);
}

sub vcl_backend_response {
    unset beresp.http.Set-Cookie;
}

sub vcl_deliver {
    if (req.http.X-AB-New) {
        set resp.http.Set-Cookie = "ab_group=" + req.http.X-AB + "; Path=/; Max-Age=2592000";
    }
    set resp.http.X-AB = req.http.X-AB;
}
