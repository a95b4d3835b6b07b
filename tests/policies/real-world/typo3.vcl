# Pattern: TYPO3 with the varnish extension: BAN by X-Cache-Tags sent on a BAN request,
# backend-user (be_typo_user) requests and the install tool passed, frontend sessions
# (fe_typo_user) passed only when the page says so, and the other cookies dropped.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

acl ban {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (!client.ip ~ ban) {
            return (synth(405, "Not allowed"));
        }
        if (req.http.X-Cache-Tags) {
            ban("obj.http.X-Cache-Tags ~ " + req.http.X-Cache-Tags);
        } else {
            ban("obj.http.X-Host == " + req.http.Host + " && obj.http.X-Url ~ " + req.url);
        }
        return (synth(200, "Banned"));
    }
    if (req.url ~ "^/typo3/" || req.url ~ "^/typo3conf/" || req.http.Cookie ~ "be_typo_user") {
        return (pass);
    }
    if (req.url ~ "(\?|&)(no_cache|type)=") {
        return (pass);
    }
    if (req.http.Cookie !~ "fe_typo_user") {
        unset req.http.Cookie;
    }
}

sub vcl_backend_response {
    set beresp.http.X-Url = bereq.url;
    set beresp.http.X-Host = bereq.http.Host;
    if (beresp.http.X-T3Cache != "1" && beresp.http.Set-Cookie) {
        set beresp.uncacheable = true;
        set beresp.ttl = 2m;
        return (deliver);
    }
    unset beresp.http.Set-Cookie;
}

sub vcl_deliver {
    unset resp.http.X-Url;
    unset resp.http.X-Host;
    unset resp.http.X-Cache-Tags;
}
