vcl 4.1;

sub vcl_fetch {
    set beresp.ttl = 1h;
}
