vcl 4.1;

sub vcl_recv {
    set beresp.ttl = 1h;
}
