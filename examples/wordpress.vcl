# wordpress.vcl: caching a WordPress site.
#
# * Logged-in users, commenters and the admin area are never cached.
# * Tracking query parameters (utm_*, fbclid, gclid, ...) are stripped so
#   they do not split the cache.
# * Static assets lose their cookies (both ways) and are kept for a week.
# * Everything else: other cookies are dropped so pages are cacheable, and
#   HTML is kept for 5 minutes unless the backend says otherwise.

vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
    .connect_timeout = 2s;
    .first_byte_timeout = 30s;
    .between_bytes_timeout = 10s;
    # The probe asks for the home page, which every WordPress site (and `edgecache demo`)
    # answers with 200. A path the origin does not have makes the backend sick: every request
    # is then answered 503, and the log says "backend went sick" with the probe's status.
    .probe = {
        .url = "/";
        .interval = 5s;
        .timeout = 2s;
        .window = 5;
        .threshold = 3;
    }
}

acl purgers {
    "localhost";
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    # PURGE from trusted hosts (e.g. a cache-purge plugin).
    if (req.method == "PURGE") {
        if (!client.ip ~ purgers) {
            return (synth(405, "Not allowed"));
        }
        return (purge);
    }

    # Strip tracking parameters, then tidy up the query string.
    if (req.url ~ "(\?|&)(utm_[a-z]+|fbclid|gclid|gclsrc|dclid|msclkid|mc_cid|mc_eid|_ga)=") {
        set req.url = regsuball(req.url, "(utm_[a-z]+|fbclid|gclid|gclsrc|dclid|msclkid|mc_cid|mc_eid|_ga)=[^&]*&?", "");
        set req.url = regsub(req.url, "[?&]+$", "");
    }
    set req.url = std.querysort(req.url);

    # Never cache the admin area, the login page, previews, or the API for writers.
    if (req.url ~ "^/wp-(admin|login\.php|cron\.php)" || req.url ~ "(\?|&)preview=true") {
        return (pass);
    }

    # Logged-in users and commenters see personalised pages.
    if (req.http.Cookie ~ "wordpress_logged_in_|comment_author_|wp-postpass_|woocommerce_items_in_cart") {
        return (pass);
    }

    # Static assets and anonymous visitors: drop cookies (analytics and the
    # like) so GET/HEAD requests are cacheable. Other methods still reach the
    # builtin, which passes them.
    if (req.method == "GET" || req.method == "HEAD") {
        unset req.http.Cookie;
    }
}

sub vcl_backend_response {
    if (bereq.url ~ "(?i)\.(css|js|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|eot|mp4|webm|pdf)(\?.*)?$") {
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 7d;
        set beresp.grace = 1d;
        set beresp.http.Cache-Control = "public, max-age=604800";
        return (deliver);
    }
    # Pages without their own caching headers: 5 minutes, with grace for bursts.
    if (!beresp.http.Cache-Control && !beresp.http.Expires) {
        set beresp.ttl = 5m;
    }
    set beresp.grace = 1h;
}

sub vcl_deliver {
    # edgecache sets X-Cache itself (HIT, MISS, PASS, STALE, REVALIDATED, SYNTH), so the usual
    # Varnish `obj.hits > 0` idiom for it is not needed here; report the hit count instead.
    set resp.http.X-Cache-Hits = obj.hits;
}
