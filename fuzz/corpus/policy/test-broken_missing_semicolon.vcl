vcl 4.1;

sub vcl_recv {
    set req.http.X-A = "a"
    return (hash);
}
