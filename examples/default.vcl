# default.vcl: edgecache's builtin behaviour, spelled out.
#
# Running with this file behaves exactly like running with no policy at all:
# every sub below ends with the same `return` the builtin VCL would reach.
# It follows Varnish 7.7's builtin.vcl, except that unknown methods, which
# Varnish would pipe, are passed to the origin (it decides), and WebSocket
# upgrades are piped. Copy it as a starting point and edit what you need.

vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    # Host is required in HTTP/1.1; normalise its case.
    if (req.http.host ~ "[[:upper:]]") {
        set req.http.host = req.http.host.lower();
    }
    if (!req.http.host && req.esi_level == 0 && req.proto == "HTTP/1.1") {
        return (synth(400));
    }
    if (req.http.Upgrade ~ "(?i)websocket") {
        # A WebSocket handshake: the connection becomes a tunnel to the origin.
        return (pipe);
    }
    if (req.method == "PRI") {
        return (synth(405));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        # Only GET and HEAD are cached; other methods, known or not, go to the origin.
        return (pass);
    }
    if (req.http.Authorization || req.http.Cookie) {
        # Personalised requests are not cached.
        return (pass);
    }
    return (hash);
}

sub vcl_hash {
    hash_data(req.url);
    if (req.http.host) {
        hash_data(req.http.host);
    } else {
        hash_data(server.ip);
    }
    return (lookup);
}

sub vcl_purge {
    return (synth(200, "Purged"));
}

sub vcl_hit {
    return (deliver);
}

sub vcl_miss {
    return (fetch);
}

sub vcl_pass {
    return (fetch);
}

sub vcl_deliver {
    return (deliver);
}

sub vcl_synth {
    set resp.http.Content-Type = "text/html; charset=utf-8";
    set resp.http.Retry-After = "5";
    set resp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + resp.status + " " + resp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + resp.status + " " + resp.reason + {"</h1>
    <p>"} + resp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + req.xid + {"</p>
    <hr>
    <p>edgecache server</p>
  </body>
</html>
"};
    return (deliver);
}

sub vcl_backend_fetch {
    if (bereq.method == "GET") {
        unset bereq.body;
    }
    return (fetch);
}

sub vcl_backend_response {
    # Which responses are stored is decided by vcl_builtin_backend_response, which runs
    # edgecache's storage rules natively (the same as without a policy, RFC 9111 §3): no-store,
    # private, Vary: *, Set-Cookie, Surrogate-Control: no-store, or nothing left to use (no
    # freshness, no validator, no stale window) make the response hit-for-miss for 120s;
    # Content-Range is removed from responses other than 206 and 416.
    call vcl_builtin_backend_response;
    return (deliver);
}

sub vcl_backend_error {
    set beresp.http.Content-Type = "text/html; charset=utf-8";
    set beresp.http.Retry-After = "5";
    set beresp.body = {"<!DOCTYPE html>
<html>
  <head>
    <title>"} + beresp.status + " " + beresp.reason + {"</title>
  </head>
  <body>
    <h1>Error "} + beresp.status + " " + beresp.reason + {"</h1>
    <p>"} + beresp.reason + {"</p>
    <h3>Guru Meditation:</h3>
    <p>XID: "} + bereq.xid + {"</p>
    <hr>
    <p>edgecache server</p>
  </body>
</html>
"};
    return (deliver);
}

sub vcl_init {
    return (ok);
}

sub vcl_fini {
    return (ok);
}
