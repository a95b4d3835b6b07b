# Pattern: Shopware 6's reverse-proxy VCL without xkey: the sw-cache-hash cookie (the
# customer's context) in the hash, sessions with cart or login states passed, BAN by the
# tags Shopware stores in X-Cache-Tags, and the admin, API and checkout never cached.
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

acl purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (!client.ip ~ purgers) {
            return (synth(403, "Forbidden"));
        }
        ban("obj.http.X-Cache-Tags ~ " + req.http.X-Cache-Tags);
        return (synth(200, "BAN done"));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    if (req.url ~ "^/(admin|api|store-api|checkout|account|widgets/checkout)") {
        return (pass);
    }
    if (req.http.cookie ~ "sw-states=" && req.http.cookie ~ "(logged-in|cart-filled)") {
        return (pass);
    }
    set req.url = std.querysort(req.url);
    return (hash);
}

sub vcl_hash {
    if (req.http.cookie ~ "sw-cache-hash=") {
        hash_data(regsub(req.http.cookie, "^.*?sw-cache-hash=([^;]*).*$", "\1"));
    } elseif (req.http.cookie ~ "sw-currency=") {
        hash_data(regsub(req.http.cookie, "^.*?sw-currency=([^;]*).*$", "\1"));
    }
}

sub vcl_backend_response {
    unset beresp.http.Set-Cookie;
    if (beresp.http.sw-invalidation-states) {
        set beresp.http.X-Invalidation-States = beresp.http.sw-invalidation-states;
    }
}

sub vcl_deliver {
    unset resp.http.X-Cache-Tags;
    if (resp.http.sw-dynamic-cache-bypass) {
        set resp.http.Cache-Control = "no-cache, private";
    }
}
