# Pattern: caching GraphQL POSTs by their body with vmod bodyaccess, as API caches do: the
# body buffered with std.cache_req_body (413 when too large), mutations passed by a regex
# on the body, queries hashed by body, and the fetch sent as the POST it was.
vcl 4.1;

import std;
import bodyaccess;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    unset req.http.X-Body-Len;
    if (req.method == "POST" && req.url ~ "^/graphql") {
        if (!std.cache_req_body(64KB)) {
            return (synth(413, "Request body too large"));
        }
        if (bodyaccess.rematch_req_body({"(?i)"query"\s*:\s*"\s*mutation"}) == 1) {
            return (pass);
        }
        set req.http.X-Body-Len = bodyaccess.len_req_body();
        return (hash);
    }
}

sub vcl_hash {
    if (req.http.X-Body-Len) {
        bodyaccess.hash_req_body();
    } else {
        hash_data("");
    }
}

sub vcl_backend_fetch {
    if (bereq.http.X-Body-Len) {
        set bereq.method = "POST";
    }
}

sub vcl_backend_response {
    if (bereq.http.X-Body-Len) {
        set beresp.ttl = 60s;
    }
}

sub vcl_deliver {
    unset resp.http.X-Body-Len;
}
