# edgecache's equivalent of FOSHttpCache's resources/config/varnish/fos_tags_xkey.vcl:
# tag invalidation with `PURGEKEYS` requests, as FOS\HttpCache\ProxyClient\Varnish sends them
# in tag_mode "purgekeys" (the tags, space separated, in `xkey-purge` or `xkey-softpurge`).
# The including file declares `acl invalidators`, calls fos_tags_xkey_recv from vcl_recv and
# fos_tags_xkey_deliver from vcl_deliver. Objects are tagged by the `xkey` response header.

import xkey;

sub fos_tags_xkey_recv {
    if (req.method == "PURGEKEYS") {
        if (!client.ip ~ invalidators) {
            return (synth(405, "Not allowed"));
        }

        # Neither header: a 400, so that a wrong configuration shows.
        if (!req.http.xkey-purge && !req.http.xkey-softpurge) {
            return (synth(400, "Neither header XKey-Purge or XKey-SoftPurge set"));
        }

        # Remove (purge) and/or expire (softpurge) what is tagged, as the headers ask.
        set req.http.n-gone = 0;
        set req.http.n-softgone = 0;
        if (req.http.xkey-purge) {
            set req.http.n-gone = xkey.purge(req.http.xkey-purge);
        }

        if (req.http.xkey-softpurge) {
            set req.http.n-softgone = xkey.softpurge(req.http.xkey-softpurge);
        }

        return (synth(200, "Purged " + req.http.n-gone + " objects, expired " + req.http.n-softgone + " objects"));
    }
}

sub fos_tags_xkey_deliver {
    if (!resp.http.X-Cache-Debug) {
        # Tags reach only debugging clients.
        unset resp.http.xkey;
    }
}
