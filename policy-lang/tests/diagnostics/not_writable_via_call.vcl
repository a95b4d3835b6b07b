vcl 4.1;

sub vcl_backend_response {
    call normalize;
}

sub normalize {
    set req.url = regsub(req.url, "\?.*$", "");
}
