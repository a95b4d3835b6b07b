vcl 4.1;

backend origin { .host = "127.0.0.1"; .port = "8080"; }

sub vcl_recv {
    set req.backend_hint = orign;
}
