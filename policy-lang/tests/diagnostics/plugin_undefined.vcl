vcl 4.1;

backend default { .host = "127.0.0.1"; }

plugin auth {
    .path = "plugins/auth.wasm";
}

sub vcl_recv {
    plugin.request(aut);
}
