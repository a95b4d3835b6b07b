# Pattern: static-asset rules written with shell wildcards (std.fnmatch) instead of regexes,
# and a debug header stamped with std.strftime, as hosting providers' shared VCLs do.
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (std.fnmatch("/static/*", req.url, pathname=false) || std.fnmatch("/*.css", req.url)) {
        unset req.http.Cookie;
    }
}

sub vcl_backend_response {
    if (std.fnmatch("/static/*", bereq.url, pathname=false)) {
        set beresp.ttl = 7d;
        set beresp.http.X-Cached-At = std.strftime(now, "%Y-%m-%dT%H:%M:%SZ");
    }
}
