# Pattern: Varnish as a Kubernetes ingress gateway: services picked by Host with round-robin
# directors over their pods, /healthz answered by the gateway itself, plain HTTP redirected
# to HTTPS with the classic synth 750 + Location, and the service name shown in a header.
vcl 4.1;

import directors;

probe pod_health {
    .url = "/healthz";
    .interval = 5s;
    .timeout = 1s;
    .window = 5;
    .threshold = 3;
}

backend web_1 { .host = "127.0.0.1"; .port = "8081"; .probe = pod_health; }
backend web_2 { .host = "127.0.0.1"; .port = "8081"; .probe = pod_health; }
backend api_1 { .host = "127.0.0.1"; .port = "8082"; .probe = pod_health; }

sub vcl_init {
    new web = directors.round_robin();
    web.add_backend(web_1);
    web.add_backend(web_2);
    new api = directors.round_robin();
    api.add_backend(api_1);
}

sub vcl_recv {
    if (req.url == "/healthz") {
        return (synth(200, "OK"));
    }
    if (req.http.X-Forwarded-Proto == "http") {
        return (synth(750, "https://" + req.http.Host + req.url));
    }
    if (req.http.Host ~ "^api\.") {
        set req.backend_hint = api.backend();
        set req.http.X-Service = "api";
        return (pass);
    }
    set req.backend_hint = web.backend();
    set req.http.X-Service = "web";
}

sub vcl_synth {
    if (resp.status == 750) {
        set resp.http.Location = resp.reason;
        set resp.status = 301;
        set resp.reason = "Moved Permanently";
        return (deliver);
    }
}

sub vcl_deliver {
    set resp.http.X-Service = req.http.X-Service;
}
