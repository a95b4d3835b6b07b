vcl 4.1;

sub vcl_recv {
    if (req.ulr ~ "^/admin") {
        return (pass);
    }
}
