vcl 4.1;

sub vcl_recv {
    set req.http.X-Forwarded-Proto = "https"
    return (hash);
}
