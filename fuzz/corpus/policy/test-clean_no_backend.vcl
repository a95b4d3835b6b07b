vcl 4.1;

# No backend declared: `edgecache -f` takes the origin from `-b`.
sub vcl_deliver {
    set resp.http.X-Policy = "clean_no_backend";
}
