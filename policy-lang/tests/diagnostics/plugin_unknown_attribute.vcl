vcl 4.1;

backend default { .host = "127.0.0.1"; }

plugin auth {
    .path = "plugins/auth.wasm";
    .confg = "key=s3cret";
}

sub vcl_recv {
    plugin.request(auth);
}
