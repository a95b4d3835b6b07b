vcl 4.1;

sub vcl_recv {
    call a;
}

sub a {
    call b;
}

sub b {
    call a;
}
