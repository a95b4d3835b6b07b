# Pattern: an include fragment (no `vcl` line) that a CMS setup shares between sites: the
# PURGE/BAN endpoint, with its ACL declared here and the backend, the `normalize` sub and
# `import std;` left to the including file.
acl purgers {
    "127.0.0.1";
    "::1";
    "10.0.0.0"/8;
}

sub purge_endpoint {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(405, "Not allowed."));
        }
        return (purge);
    }
    if (req.method == "BAN") {
        if (client.ip !~ purgers) {
            return (synth(405, "Not allowed."));
        }
        ban("obj.http.x-url ~ " + req.url);
        std.log("ban " + req.url);
        return (synth(200, "Ban added"));
    }
    call normalize;
}
