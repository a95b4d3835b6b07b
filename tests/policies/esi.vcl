vcl 4.1;

# ESI as tests/esi.rs uses it: pages marked by the origin (`x-esi: 1`) are parsed when stored,
# each include goes through vcl_recv like any request and shows the policy what it sees.

sub vcl_recv {
    # Sent to the origin, which echoes them: what the policy saw of each request.
    set req.http.x-esi-level = req.esi_level;
    set req.http.x-top-url = req_top.url;
    set req.http.x-esi-request = req.esi;
    if (req.url ~ "^/passed") {
        return (pass);
    }
}

sub vcl_backend_response {
    if (beresp.http.x-esi) {
        set beresp.do_esi = true;
    }
}

sub vcl_deliver {
    set resp.http.x-can-esi = obj.can_esi;
}
