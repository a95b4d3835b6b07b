vcl 4.1;

sub vcl_backend_response {
    set beresp.ttl = "120";
}
