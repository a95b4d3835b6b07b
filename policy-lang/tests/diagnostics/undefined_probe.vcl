vcl 4.1;

probe healthcheck { .url = "/health"; }

backend default {
    .host = "127.0.0.1";
    .probe = health_check;
}
