# Pattern: varnish-devicedetect's shape: the User-Agent classified into X-UA-Device
# (mobile, tablet, bot, pc), the class hashed so each gets its own copy, the origin told with
# a header, and Vary rewritten on the way out so browsers' caches stay right.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub devicedetect {
    unset req.http.X-UA-Device;
    set req.http.X-UA-Device = "pc";
    if (req.http.User-Agent ~ "(?i)(ads|google|bing|msn|yandex|baidu|ro|career|seznam|)bot"
        || req.http.User-Agent ~ "(?i)(baidu|jike|symantec)spider") {
        set req.http.X-UA-Device = "bot";
    } elsif (req.http.User-Agent ~ "(?i)ipad|tablet|(android(?!.*mobile))") {
        set req.http.X-UA-Device = "tablet";
    } elsif (req.http.User-Agent ~ "(?i)iphone|ipod|android.*mobile|windows phone|blackberry") {
        set req.http.X-UA-Device = "mobile";
    }
    if (req.http.Cookie ~ "(?i)X-UA-Device-force") {
        set req.http.X-UA-Device = regsub(req.http.Cookie, "(?i).*X-UA-Device-force=([^;]+);?.*", "\1");
    }
}

sub vcl_recv {
    call devicedetect;
}

sub vcl_hash {
    hash_data(req.http.X-UA-Device);
}

sub vcl_backend_fetch {
    set bereq.http.X-UA-Device = bereq.http.X-UA-Device;
}

sub vcl_backend_response {
    if (beresp.http.Vary) {
        set beresp.http.Vary = beresp.http.Vary + ", X-UA-Device";
    } else {
        set beresp.http.Vary = "X-UA-Device";
    }
}

sub vcl_deliver {
    if (resp.http.Vary) {
        set resp.http.Vary = regsub(resp.http.Vary, "X-UA-Device", "User-Agent");
    }
    set resp.http.X-UA-Device = req.http.X-UA-Device;
}
