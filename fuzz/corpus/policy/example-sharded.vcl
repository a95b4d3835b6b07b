# sharded.vcl: a consistent-hash director over three origins (or three cache nodes), so
# that each URL always goes to the same one. When one leaves (sick, or removed from the
# list), only its share of URLs moves to the others; the rest stay where they are.
#
#   edgecache -a :6081 -f examples/sharded.vcl
#
# Replace the hosts and ports with your servers'.
vcl 4.1;

import directors;

probe health {
    .url = "/";
    .interval = 2s;
    .timeout = 1s;
    .window = 5;
    .threshold = 3;
    .initial = 3;
}

backend shard1 { .host = "127.0.0.1"; .port = "8081"; .probe = health; }
backend shard2 { .host = "127.0.0.1"; .port = "8082"; .probe = health; }
backend shard3 { .host = "127.0.0.1"; .port = "8083"; .probe = health; }

sub vcl_init {
    new ring = directors.hash();
    # The weight sets a shard's share of URLs.
    ring.add_backend(shard1, 1.0);
    ring.add_backend(shard2, 1.0);
    ring.add_backend(shard3, 1.0);
}

sub vcl_recv {
    # Hash on the URL alone, so one URL lives on one shard whatever the Host.
    set req.backend_hint = ring.backend(req.url);
}
