# Pattern: a cluster of caches sharded with directors.shard (as Varnish's docs describe the
# cluster): every URL has one owner among the nodes, picked on the client side with
# by=URL so the owner can be named in a header, and a retry goes to the next node on the
# ring (alt) when the owner fails.
vcl 4.1;

import directors;

backend node1 { .host = "127.0.0.1"; .port = "8081"; }
backend node2 { .host = "127.0.0.1"; .port = "8082"; }
backend node3 { .host = "127.0.0.1"; .port = "8083"; }

sub vcl_init {
    new cluster = directors.shard();
    cluster.add_backend(node1);
    cluster.add_backend(node2);
    cluster.add_backend(node3);
    cluster.set_warmup(0.0);
    cluster.reconfigure(replicas=67);
}

sub vcl_recv {
    set req.backend_hint = cluster.backend(by=URL);
    set req.http.X-Shard = req.backend_hint;
}

sub vcl_backend_fetch {
    if (bereq.retries > 0) {
        set bereq.backend = cluster.backend(by=URL, alt=bereq.retries, healthy=ALL);
    }
}

sub vcl_backend_response {
    if (beresp.status >= 500 && bereq.retries < 2) {
        return (retry);
    }
}

sub vcl_deliver {
    set resp.http.X-Shard = req.http.X-Shard;
}
