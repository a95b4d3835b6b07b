# Pattern: Drupal 10 with the Purge module: BAN by cache tag (X-Drupal-Cache-Tags stored on
# the object, banned with a regex the module sends in Cache-Tags), /user and /admin passed,
# only the session cookie (SESS*/SSESS*) kept, and the tag headers hidden from clients.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

acl purge {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (!client.ip ~ purge) {
            return (synth(403, "Not allowed."));
        }
        if (req.http.Cache-Tags) {
            ban("obj.http.X-Drupal-Cache-Tags ~ " + req.http.Cache-Tags);
        } else {
            ban("req.url ~ " + req.url);
        }
        return (synth(200, "Ban added."));
    }
    if (req.url ~ "^/status\.php$" || req.url ~ "^/update\.php$" || req.url ~ "^/(admin|user)(/|$)") {
        return (pass);
    }
    if (req.http.Cookie) {
        set req.http.Cookie = ";" + req.http.Cookie;
        set req.http.Cookie = regsuball(req.http.Cookie, "; +", ";");
        set req.http.Cookie = regsuball(req.http.Cookie, ";(S?SESS[a-z0-9]+)=", "; \1=");
        set req.http.Cookie = regsuball(req.http.Cookie, ";[^ ][^;]*", "");
        set req.http.Cookie = regsuball(req.http.Cookie, "^[; ]+|[; ]+$", "");
        if (req.http.Cookie == "") {
            unset req.http.Cookie;
        } else {
            return (pass);
        }
    }
}

sub vcl_backend_response {
    set beresp.http.X-Url = bereq.url;
    if (beresp.status == 301 || beresp.status == 302 || beresp.status == 404) {
        set beresp.ttl = 10m;
    }
}

sub vcl_deliver {
    unset resp.http.X-Url;
    unset resp.http.X-Drupal-Cache-Tags;
    unset resp.http.X-Drupal-Cache-Contexts;
}
