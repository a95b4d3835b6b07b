vcl 4.1;

backend default { .host = "127.0.0.1"; }

plugin headers {
    .path = "plugins/add-header.wasm";
}

sub vcl_recv {
    plugin.response(headers);
}

sub vcl_deliver {
    call run_auth;
}

sub run_auth {
    plugin.request(headers);
}
