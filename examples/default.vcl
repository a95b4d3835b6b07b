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
    # What is looked up is decided by vcl_builtin_recv, which edgecache runs natively (the
    # same code as without a policy, so the switches below apply to it):
    #  * Host is lower-cased; an HTTP/1.1 request without one gets synth(400);
    #  * a WebSocket handshake is piped (the connection becomes a tunnel to the origin);
    #  * PRI gets synth(405);
    #  * methods other than GET and HEAD, known or not, are passed to the origin; a POST
    #    response with explicit freshness and a Content-Location naming its URL is still
    #    stored for later GETs (--no-store-post-responses turns that off);
    #  * requests with Authorization or Cookie are passed (--lookup-with-authorization,
    #    --lookup-with-cookie look them up; a response to a request with Authorization is
    #    then stored only when public, s-maxage or must-revalidate).
    # A `return (pass)` written here instead is this policy's own decision: Varnish's pass,
    # which stores nothing, whatever the switches say.
    call vcl_builtin_recv;
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
    # freshness, no validator, no stale window) make the response hit-for-miss for 120s.
    # Content-Range is kept, as RFC 9111 §3.1 stores every field (`call vcl_beresp_range;`
    # removes it from responses other than 206 and 416, as Varnish's builtin does).
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
