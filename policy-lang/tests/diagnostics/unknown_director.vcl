vcl 4.1;
import directors;
backend a { .host = "10.0.0.1"; }
sub vcl_init {
    new cluster = directors.round_robbin();
    new ring = directors.vslp();
}
