vcl 4.1;

backend default { .host = "127.0.0.1"; }

plugin auth {
    .config = "key=s3cret";
    .on_error = deny;
}

sub vcl_recv {
    plugin.request(auth);
}
