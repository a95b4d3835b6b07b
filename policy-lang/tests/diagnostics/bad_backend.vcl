vcl 4.1;

backend default {
    .hots = "127.0.0.1";
    .port = "http";
    .connect_timeout = 5;
}
