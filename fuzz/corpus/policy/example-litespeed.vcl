# litespeed.vcl: migrating from LiteSpeed's cache.
#
# LiteSpeed:  RewriteRule test.php - [E=Cache-Control:max-age=45]
#             (plus a default TTL of 120 s for everything else)
# edgecache:  the per-URL TTL below.
#
# The LiteSpeed cache-policy switches have VCL equivalents; each is written
# out as a commented recipe further down. Uncomment the ones you need.

vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    # --- "Cache Request with Query String": On (default here).
    # Off: uncomment to bypass the cache for any URL with a query string.
    # if (req.url ~ "\?") {
    #     return (pass);
    # }

    # --- "Cache Request with Cookie": Off (the builtin passes requests
    # with a Cookie header). On: uncomment to ignore request cookies.
    # unset req.http.Cookie;

    # --- "Ignore Request Cache-Control": On (edgecache does not let a
    # client's `Cache-Control: no-cache` bypass the cache by default).
    # Off: uncomment to honour it by fetching a fresh copy.
    # if (req.http.Cache-Control ~ "(?i)no-cache|max-age=0") {
    #     set req.hash_always_miss = true;
    # }
}

sub vcl_backend_response {
    # Per-URL TTL: test.php is cached for 45 s and tells clients the same.
    if (bereq.url ~ "^/test\.php($|\?)") {
        set beresp.ttl = 45s;
        set beresp.http.Cache-Control = "max-age=45";
        unset beresp.http.Set-Cookie;
        return (deliver);
    }

    # --- "Cache Response with Set-Cookie": Off (the builtin makes such
    # responses uncacheable). On: uncomment to cache them without the cookie.
    # unset beresp.http.Set-Cookie;

    # --- "Ignore Response Cache-Control": Off. On: uncomment to apply the
    # default TTL below even when the backend says `private` / `no-cache`.
    # unset beresp.http.Cache-Control;
    # unset beresp.http.Expires;
    # set beresp.ttl = 120s;
    # return (deliver);

    # Default TTL for everything else: 120 s unless the backend sent its own.
    if (!beresp.http.Cache-Control && !beresp.http.Expires) {
        set beresp.ttl = 120s;
    }
}
