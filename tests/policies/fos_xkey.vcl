# The shape of FOSHttpCache's tests/Functional/Fixtures/varnish/fos_xkey.vcl: the tag fragment
# included and called from vcl_recv and vcl_deliver. The backend is edgecache's `-b`.
vcl 4.1;

acl invalidators {
    "127.0.0.1";
}

include "fos_tags_xkey.vcl";

sub vcl_recv {
    call fos_tags_xkey_recv;
}

sub vcl_deliver {
    call fos_tags_xkey_deliver;
}
