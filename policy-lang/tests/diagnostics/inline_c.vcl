vcl 4.1;

C{
    #include <syslog.h>
}C

sub vcl_recv {
    C{ syslog(LOG_INFO, "recv"); }C
    set req.http.X-Seen = "1";
}
