# Pattern: stale-while-revalidate and stale-if-error by hand, as most production VCLs have
# it: a short TTL with a long grace, a shorter grace while the backend is healthy, 5xx from
# a background fetch abandoned so the stale copy stays, and the age shown in a header.
vcl 4.1;

import std;

probe health {
    .url = "/health";
    .interval = 2s;
    .window = 3;
    .threshold = 2;
}

backend default {
    .host = "127.0.0.1";
    .port = "8080";
    .probe = health;
}

sub vcl_recv {
    if (std.healthy(req.backend_hint)) {
        set req.grace = 10s;
    }
}

sub vcl_backend_response {
    if (beresp.status >= 500 && bereq.is_bgfetch) {
        return (abandon);
    }
    set beresp.ttl = 30s;
    set beresp.grace = 24h;
    set beresp.keep = 7d;
}

sub vcl_deliver {
    set resp.http.X-Age = resp.http.Age;
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
