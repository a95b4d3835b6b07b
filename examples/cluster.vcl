# cluster.vcl: a self-routing cache tier, for sites without a hashing balancer in front (the
# "self-routing cluster" of the Varnish documentation). Every node runs this same policy; a
# shard director over all nodes names each URL's owner. A request that lands on another node
# is passed (not stored there) to the owner, marked with X-Cluster-Hop; the owner serves it
# from its cache or the origin and never forwards it again. Each URL is stored once in the
# tier and fetched once from the origin. See docs/cluster.md.
#
#   EDGECACHE_NODE=n0 edgecache -a :6081 -f examples/cluster.vcl    # on node n0, and so on
#
# EDGECACHE_NODE names this node's backend below (read when the policy loads). Replace the
# hosts and ports with your nodes' and origin's.
vcl 4.1;

import directors;
import std;

# A node that drains (SIGTERM, --drain-time) or dies leaves the ring; its URLs go to the
# next nodes, the others stay where they are.
probe node_health {
    .url = "/healthz";
    .interval = 1s;
    .timeout = 500ms;
    .window = 3;
    .threshold = 2;
    .initial = 2;
}

backend origin { .host = "10.0.0.20"; .port = "8080"; }

backend n0 { .host = "10.0.0.11"; .port = "6081"; .probe = node_health; }
backend n1 { .host = "10.0.0.12"; .port = "6081"; .probe = node_health; }
backend n2 { .host = "10.0.0.13"; .port = "6081"; .probe = node_health; }

sub vcl_init {
    new cluster = directors.shard();
    cluster.add_backend(n0);
    cluster.add_backend(n1);
    cluster.add_backend(n2);
    cluster.reconfigure();
}

sub vcl_recv {
    if (req.http.X-Cluster-Hop) {
        # Another node routed this here: this node owns the URL, whatever its own view of the
        # ring says now, so the request cannot go round.
        set req.backend_hint = origin;
        return (hash);
    }
    set req.backend_hint = cluster.backend(by=URL);
    if ("" + req.backend_hint == std.getenv("EDGECACHE_NODE")) {
        set req.backend_hint = origin;
        return (hash);
    }
    # Not ours: fetched from the owner, stored there only.
    set req.http.X-Cluster-Hop = std.getenv("EDGECACHE_NODE");
    return (pass);
}
