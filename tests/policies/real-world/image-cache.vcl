# Pattern: an image resizing cache in front of an imgproxy/thumbor-style service: the query
# reduced to the parameters that change the image, the width bounded with std.integer (a
# synth 400 for absurd sizes), WebP negotiated by a normalised Accept, cookies dropped, and
# images kept for 30 days.
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (req.url !~ "^/img/") {
        return (pass);
    }
    unset req.http.Cookie;
    unset req.http.Authorization;
    if (req.url ~ "[?&]w=") {
        set req.http.X-Width = regsub(req.url, "^.*[?&]w=([0-9]+).*$", "\1");
        if (std.integer(req.http.X-Width, 0) > 4000 || std.integer(req.http.X-Width, 0) < 1) {
            return (synth(400, "Bad width"));
        }
    }
    # Only w, h and q change the image; the order does not matter.
    set req.url = std.querysort(regsuball(req.url, "([?&])(?!(w|h|q)=)[^&=]+=[^&]*", "\1"));
    set req.url = regsuball(req.url, "&&+", "&");
    set req.url = regsub(req.url, "[?&]+$", "");
    if (req.http.Accept ~ "image/webp") {
        set req.http.Accept = "image/webp";
    } else {
        unset req.http.Accept;
    }
    return (hash);
}

sub vcl_hash {
    hash_data(req.http.Accept);
}

sub vcl_backend_response {
    if (beresp.status == 200 && beresp.http.Content-Type ~ "^image/") {
        set beresp.ttl = 30d;
        set beresp.grace = 1d;
        unset beresp.http.Set-Cookie;
    } elsif (beresp.status >= 500) {
        set beresp.ttl = 5s;
    }
}

sub vcl_deliver {
    unset resp.http.X-Width;
    set resp.http.Vary = "Accept";
}
