vcl 4.1;

sub vcl_deliver {
    if (beresp.http.Set-Cookie) {
        unset resp.http.Set-Cookie;
    }
}
