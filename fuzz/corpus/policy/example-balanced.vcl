# balanced.vcl: three application servers behind a least-connections director, each with
# a health probe. A slow server holding requests gets fewer new ones; a server that fails
# its probe is skipped until it recovers; when all are down, cached pages are served stale
# for up to an hour (grace) instead of a 503.
#
#   edgecache -a :6081 -f examples/balanced.vcl
#
# Replace the hosts and ports with your servers'. `edgecache admin backends` shows each
# backend's health and probe window.
vcl 4.1;

import std;
import directors;

probe health {
    .url = "/";                # use a cheap page; it must answer 200
    .interval = 2s;
    .timeout = 1s;
    .window = 5;               # the last 5 probes ...
    .threshold = 3;            # ... of which 3 must succeed
    .initial = 3;              # start healthy
}

backend app1 { .host = "127.0.0.1"; .port = "8081"; .probe = health; .max_connections = 200; }
backend app2 { .host = "127.0.0.1"; .port = "8082"; .probe = health; .max_connections = 200; }
backend app3 { .host = "127.0.0.1"; .port = "8083"; .probe = health; .max_connections = 200; }

sub vcl_init {
    new pool = directors.least_connections();
    pool.add_backend(app1);
    pool.add_backend(app2);
    pool.add_backend(app3);
}

sub vcl_recv {
    set req.backend_hint = pool.backend();
}

sub vcl_backend_response {
    # Keep objects for an hour past their TTL: served stale (and refreshed in the
    # background) when the origins are slow or down.
    set beresp.grace = 1h;
    # Which server produced the response (the director picked it at fetch time).
    set beresp.http.X-Served-By = beresp.backend.name;
}
