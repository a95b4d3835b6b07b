# Pattern: the multi-site "label router" of Varnish 6+: a small top VCL that only picks the
# site's own VCL by Host (loaded with vcl.load / vcl.label), so each site is edited and
# reloaded on its own; anything else is refused.
vcl 4.1;

backend default none;

sub vcl_recv {
    if (req.http.Host ~ "(?i)^(www\.)?shop\.example\.com$") {
        return (vcl(shop));
    }
    if (req.http.Host ~ "(?i)^(www\.)?blog\.example\.com$") {
        return (vcl(blog));
    }
    return (synth(404, "Unknown site"));
}
