# Pattern: a site file that includes a shared fragment (includes/purge-acl.vcl) providing
# the PURGE/BAN endpoint; it declares what the fragment leaves to it (the import, the
# backend and the `normalize` sub).
vcl 4.1;

import std;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

include "includes/purge-acl.vcl";

sub normalize {
    set req.url = std.querysort(req.url);
    if (req.url ~ "\?$") {
        set req.url = regsub(req.url, "\?$", "");
    }
}

sub vcl_recv {
    call purge_endpoint;
}

sub vcl_backend_response {
    set beresp.http.x-url = bereq.url;
}

sub vcl_deliver {
    unset resp.http.x-url;
}
