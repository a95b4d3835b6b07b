# Pattern: MediaWiki's manual VCL: PURGE from the wiki's servers, logged-in users (session,
# Token or UserID cookies) passed, api.php and Special: pages passed, the Accept-Encoding
# normalised, and HTTPS kept apart in the hash.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
    .first_byte_timeout = 120s;
}

acl purge {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (!client.ip ~ purge) {
            return (synth(405, "Not allowed."));
        }
        return (purge);
    }
    if (req.http.X-Forwarded-For) {
        set req.http.X-Forwarded-For = req.http.X-Forwarded-For + ", " + client.ip;
    } else {
        set req.http.X-Forwarded-For = client.ip;
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    if (req.http.Authorization || req.http.Cookie ~ "([sS]ession|Token|UserID)=") {
        return (pass);
    }
    if (req.url ~ "^/w/api\.php" || req.url ~ "Special:") {
        return (pass);
    }
    if (req.http.Accept-Encoding) {
        if (req.http.Accept-Encoding ~ "gzip") {
            set req.http.Accept-Encoding = "gzip";
        } elsif (req.http.Accept-Encoding ~ "deflate") {
            set req.http.Accept-Encoding = "deflate";
        } else {
            unset req.http.Accept-Encoding;
        }
    }
    unset req.http.Cookie;
    return (hash);
}

sub vcl_hash {
    hash_data(req.http.X-Forwarded-Proto);
}

sub vcl_backend_response {
    if (beresp.ttl < 48h) {
        set beresp.ttl = 48h;
    }
    if (beresp.http.Set-Cookie) {
        set beresp.uncacheable = true;
        return (deliver);
    }
}
