vcl 4.1;

sub never_called {
    set req.http.X-Unused = "1";
}

sub vcl_deliver {
    set resp.status = "200";
}
