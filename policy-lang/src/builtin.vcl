# edgecache builtin VCL: what runs after a user's sub falls through.
#
# This mirrors Varnish 7.7's bin/varnishd/builtin.vcl, with two differences:
#  * unknown request methods are passed to the origin (it decides) instead of
#    piped (Varnish 8.0 answers them 501);
#  * WebSocket upgrades are piped (Varnish leaves that to the user's vcl_recv).
# User VCL may `call` the helper subs (vcl_req_host, vcl_beresp_hitmiss, ...)
# directly, as in Varnish.

vcl 4.1;

#######################################################################
# Client side

sub vcl_recv {
    call vcl_builtin_recv;
    return (hash);
}

sub vcl_builtin_recv {
    call vcl_req_host;
    if (req.http.Upgrade ~ "(?i)websocket") {
        # A WebSocket handshake: the connection becomes a tunnel to the backend.
        return (pipe);
    }
    call vcl_req_method;
    call vcl_req_authorization;
    call vcl_req_cookie;
}

sub vcl_req_host {
    if (req.http.host ~ "[[:upper:]]") {
        set req.http.host = req.http.host.lower();
    }
    if (!req.http.host &&
      req.esi_level == 0 &&
      req.proto == "HTTP/1.1") {
        # In HTTP/1.1, Host is required.
        return (synth(400));
    }
}

sub vcl_req_method {
    if (req.method == "PRI") {
        # This will never happen in properly formed traffic.
        return (synth(405));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        # We only deal with GET and HEAD by default.
        return (pass);
    }
}

sub vcl_req_authorization {
    if (req.http.Authorization) {
        # Not cacheable by default.
        return (pass);
    }
}

sub vcl_req_cookie {
    if (req.http.Cookie) {
        # Risky to cache by default.
        return (pass);
    }
}

sub vcl_pipe {
    call vcl_builtin_pipe;
    # By default "Connection: close" is set on piped requests that are not
    # upgrades, so the backend connection carries only this one.
    return (pipe);
}

sub vcl_builtin_pipe {
}

sub vcl_pass {
    call vcl_builtin_pass;
    return (fetch);
}

sub vcl_builtin_pass {
}

sub vcl_hash {
    call vcl_builtin_hash;
    return (lookup);
}

sub vcl_builtin_hash {
    hash_data(req.url);
    if (req.http.host) {
        hash_data(req.http.host);
    } else {
        hash_data(server.ip);
    }
}

sub vcl_purge {
    call vcl_builtin_purge;
    return (synth(200, "Purged"));
}

sub vcl_builtin_purge {
}

sub vcl_hit {
    call vcl_builtin_hit;
    return (deliver);
}

sub vcl_builtin_hit {
}

sub vcl_miss {
    call vcl_builtin_miss;
    return (fetch);
}

sub vcl_builtin_miss {
}

sub vcl_deliver {
    call vcl_builtin_deliver;
    return (deliver);
}

sub vcl_builtin_deliver {
}

# We can come here "invisibly" with the following errors: 500 & 503
sub vcl_synth {
    call vcl_builtin_synth;
    return (deliver);
}

sub vcl_builtin_synth {
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
}

#######################################################################
# Backend Fetch

sub vcl_backend_fetch {
    call vcl_builtin_backend_fetch;
    return (fetch);
}

sub vcl_builtin_backend_fetch {
    if (bereq.method == "GET") {
        unset bereq.body;
    }
}

sub vcl_backend_response {
    call vcl_builtin_backend_response;
    return (deliver);
}

# edgecache runs this sub natively with its storage rules (those without a policy, which keep
# Content-Range: Context::builtin_backend_response) unless a user sub extends it or the subs
# it calls; then this text, with Varnish's header tests, runs instead.
sub vcl_builtin_backend_response {
    call vcl_beresp_range;
    if (bereq.uncacheable) {
        return (deliver);
    }
    call vcl_beresp_stale;
    call vcl_beresp_cookie;
    call vcl_beresp_control;
    call vcl_beresp_vary;
}

sub vcl_beresp_stale {
    if (beresp.ttl <= 0s) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_cookie {
    if (beresp.http.Set-Cookie) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_control {
    if (beresp.http.Surrogate-control ~ "(?i)no-store" ||
      (!beresp.http.Surrogate-Control &&
        beresp.http.Cache-Control ~ "(?i:no-cache|no-store|private)")) {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_vary {
    if (beresp.http.Vary == "*") {
        call vcl_beresp_hitmiss;
    }
}

sub vcl_beresp_range {
    if (beresp.status != 206 && beresp.status != 416) {
        # Content-Range only belongs on 206 and 416 responses.
        unset beresp.http.Content-Range;
    }
}

sub vcl_beresp_hitmiss {
    set beresp.ttl = 120s;
    set beresp.uncacheable = true;
    return (deliver);
}

sub vcl_backend_error {
    call vcl_builtin_backend_error;
    return (deliver);
}

sub vcl_builtin_backend_error {
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
}

#######################################################################
# Housekeeping

sub vcl_init {
    call vcl_builtin_init;
    return (ok);
}

sub vcl_builtin_init {
}

sub vcl_fini {
    call vcl_builtin_fini;
    return (ok);
}

sub vcl_builtin_fini {
}
