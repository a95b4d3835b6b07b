vcl 4.1;

backend default { .host = "127.0.0.1"; }
backend default { .host = "127.0.0.2"; }

sub vcl_recv {
}
