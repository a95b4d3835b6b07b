vcl 4.1;

sub vcl_recv {
    set req.url = req.ulr;
    return (lookup);
}

sub vcl_backend_response {
    set beresp.ttl = 10;
    set beresp.http.X-Id = req.xid;
}
