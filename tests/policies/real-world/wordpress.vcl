# Pattern: WordPress as hosting guides configure it: a PURGE endpoint for cache plugins,
# wp-admin / wp-login / previews and logged-in users passed, every other cookie stripped so
# pages are shared, static files cached long, and an X-Cache header telling hit from miss.
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
    .first_byte_timeout = 60s;
}

acl purge {
    "localhost";
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (!client.ip ~ purge) {
            return (synth(405, "This IP is not allowed to send PURGE requests."));
        }
        return (purge);
    }
    if (req.http.X-Forwarded-Proto == "https") {
        set req.http.X-Forwarded-Port = "443";
    }
    if (req.url ~ "/wp-(login|admin|cron|json)" || req.url ~ "preview=true") {
        return (pass);
    }
    if (req.http.Cookie ~ "wordpress_logged_in_|wordpress_sec_|wp-postpass_|comment_author_") {
        return (pass);
    }
    if (req.url ~ "\.(css|js|png|gif|jp(e)?g|svg|woff2?|ico)(\?.*)?$") {
        unset req.http.Cookie;
        return (hash);
    }
    # Analytics and consent cookies do not change the page.
    unset req.http.Cookie;
    set req.url = regsuball(req.url, "(\?|&)(utm_[a-z]+|fbclid|gclid)=[^&]*", "\1");
    set req.url = regsub(req.url, "[?&]+$", "");
}

sub vcl_backend_response {
    if (bereq.url ~ "\.(css|js|png|gif|jp(e)?g|svg|woff2?|ico)(\?.*)?$") {
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 7d;
    }
    if (beresp.http.Set-Cookie && bereq.url !~ "/wp-(login|admin)") {
        unset beresp.http.Set-Cookie;
    }
    set beresp.grace = 6h;
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    unset resp.http.X-Powered-By;
    unset resp.http.Server;
}
