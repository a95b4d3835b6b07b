vcl 4.1;

acl purgers { "127.0.0.1"; }

sub vcl_recv {
    if (req.method == "PURGE" && !client.ip ~ purger) {
        return (synth(405));
    }
}
