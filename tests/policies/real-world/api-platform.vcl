# Pattern: API Platform's VCL: BAN by the regex it sends in ApiPlatform-Ban-Regex against the
# Cache-Tags it stores, PURGE by URL, grace so a slow API still answers, and the tags kept
# away from clients.
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

acl invalidators {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.restarts > 0) {
        set req.hash_always_miss = true;
    }
    if (req.method == "BAN") {
        if (client.ip !~ invalidators) {
            return (synth(405, "Not allowed"));
        }
        if (req.http.ApiPlatform-Ban-Regex) {
            ban("obj.http.Cache-Tags ~ " + req.http.ApiPlatform-Ban-Regex);
            return (synth(200, "Ban added"));
        }
        return (synth(400, "ApiPlatform-Ban-Regex HTTP header must be set."));
    }
    if (req.method == "PURGE") {
        if (client.ip !~ invalidators) {
            return (synth(405, "Not allowed"));
        }
        return (purge);
    }
    # API requests are cached by Authorization only when the API says so (Vary).
    if (req.http.Authorization && req.url !~ "^/docs") {
        return (pass);
    }
}

sub vcl_hit {
    if (obj.ttl >= 0s) {
        return (deliver);
    }
    if (std.healthy(req.backend_hint)) {
        if (obj.ttl + 15s > 0s) {
            return (deliver);
        }
        return (restart);
    }
    if (obj.ttl + obj.grace > 0s) {
        return (deliver);
    }
    return (restart);
}

sub vcl_backend_response {
    set beresp.grace = 1h;
}

sub vcl_deliver {
    unset resp.http.Cache-Tags;
}
