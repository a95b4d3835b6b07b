vcl 4.1;

sub strip_cookies {
    unset req.http.Cookie;
}

sub vcl_recv {
    call strip_cookie;
}
