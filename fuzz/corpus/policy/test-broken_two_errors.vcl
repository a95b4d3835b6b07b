vcl 4.1;

sub vcl_recv {
    set req.http.X-A = "a";
    return (lookup);
}

sub vcl_backend_response {
    set beresp.ttl = "120";
}
