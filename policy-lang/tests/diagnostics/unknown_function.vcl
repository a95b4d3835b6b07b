vcl 4.1;
import std;

sub vcl_recv {
    set req.url = std.tolowr(req.url);
}
