# Pattern: Varnish 7 style, where the user's subs call the builtin hooks explicitly
# (`call vcl_builtin_recv;`) and extend the helpers: an API cache that lets bearer-token
# requests to public endpoints be cached per token, keeps authorisation checks elsewhere,
# and marks responses with the backend's verdict.
vcl 4.1;

backend api {
    .host = "127.0.0.1";
    .port = "9000";
    .first_byte_timeout = 10s;
}

sub vcl_req_authorization {
    if (req.url ~ "^/v1/public/" && req.http.Authorization ~ "^Bearer ") {
        return (hash);
    }
}

sub vcl_recv {
    unset req.http.X-Forwarded-Host;
    call vcl_builtin_recv;
    return (hash);
}

sub vcl_hash {
    call vcl_builtin_hash;
    if (req.http.Authorization) {
        hash_data(req.http.Authorization);
    }
    return (lookup);
}

sub vcl_beresp_control {
    if (beresp.http.Cache-Control ~ "(?i)private" && bereq.url ~ "^/v1/public/") {
        set beresp.ttl = 30s;
        return (deliver);
    }
}

sub vcl_deliver {
    call vcl_builtin_deliver;
    set resp.http.X-Cache-Hits = obj.hits;
}
