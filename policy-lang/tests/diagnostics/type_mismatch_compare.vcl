vcl 4.1;

sub vcl_backend_response {
    if (beresp.ttl < 60) {
        set beresp.ttl = 60s;
    }
}
