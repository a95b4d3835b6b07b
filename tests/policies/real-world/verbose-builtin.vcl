# Pattern: the "verbose builtin" of the official Docker image and many tutorials: the
# operator's own subs first, then a verbatim copy of Varnish 7.7's builtin.vcl included at the
# end so every default decision is visible (and editable) in the file they run.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (req.url ~ "^/healthz$") {
        return (synth(200, "OK"));
    }
}

include "includes/varnish-7.7-builtin.vcl";
