vcl 4.1;

sub vcl_recv {
    if (req.url ~ "^/admin") {
        return (pass);
}
