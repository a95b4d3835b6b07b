# Pattern: edge redirects and CORS as sites put them in VCL: www to apex with a 301 from
# vcl_synth, old paths mapped with regsub, CORS preflight (OPTIONS) answered at the edge with
# a 204, and the CORS headers added to every answer for allowed origins.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (req.http.Host ~ "^www\.") {
        return (synth(751, "https://" + regsub(req.http.Host, "^www\.", "") + req.url));
    }
    if (req.url ~ "^/blog/[0-9]{4}/[0-9]{2}/") {
        return (synth(751, "https://" + req.http.Host + regsub(req.url, "^/blog/[0-9]{4}/[0-9]{2}/", "/articles/")));
    }
    if (req.method == "OPTIONS" && req.http.Origin && req.http.Access-Control-Request-Method) {
        return (synth(204, "Preflight"));
    }
}

sub cors_headers {
    if (req.http.Origin ~ "^https://([a-z0-9-]+\.)?example\.(com|org)$") {
        set resp.http.Access-Control-Allow-Origin = req.http.Origin;
        set resp.http.Access-Control-Allow-Credentials = "true";
        set resp.http.Vary = "Origin";
    }
}

sub vcl_synth {
    if (resp.status == 751) {
        set resp.http.Location = resp.reason;
        set resp.status = 301;
        set resp.reason = "Moved Permanently";
        return (deliver);
    }
    if (resp.status == 204) {
        call cors_headers;
        set resp.http.Access-Control-Allow-Methods = "GET, POST, OPTIONS";
        set resp.http.Access-Control-Max-Age = "86400";
        return (deliver);
    }
}

sub vcl_deliver {
    call cors_headers;
}
