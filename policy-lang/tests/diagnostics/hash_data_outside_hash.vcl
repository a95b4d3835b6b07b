vcl 4.1;

sub vcl_recv {
    hash_data(req.http.Cookie);
}
