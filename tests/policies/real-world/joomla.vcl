# Pattern: Joomla: the administrator area and logged-in users (joomla_user_state) passed,
# the session cookie dropped for guests so their pages are shared, and static media cached
# for a day whatever the CMS says.
vcl 4.1;

backend default {
    .host = "127.0.0.1";
    .port = "8080";
}

sub vcl_recv {
    if (req.url ~ "^/administrator" || req.url ~ "option=com_users" || req.url ~ "task=") {
        return (pass);
    }
    if (req.http.Cookie ~ "joomla_user_state=logged_in") {
        return (pass);
    }
    if (req.url ~ "^/(media|images|templates)/") {
        unset req.http.Cookie;
        return (hash);
    }
    unset req.http.Cookie;
}

sub vcl_backend_response {
    if (bereq.url ~ "^/(media|images|templates)/") {
        set beresp.ttl = 1d;
        unset beresp.http.Set-Cookie;
    }
    if (beresp.http.Set-Cookie && bereq.http.Cookie !~ "joomla_user_state") {
        unset beresp.http.Set-Cookie;
    }
}
