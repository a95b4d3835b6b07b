"""The bench scripts' origin: `python3 benches/bench_origin.py PORT`.

`/dyn` answers `no-store` (every request is passed to the origin); every other path answers
510 bytes with `max-age=3600` (stored after the first request).
"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b"G" * 510


class Origin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body go out in two writes: without TCP_NODELAY, Nagle holds the body
    # until edgecache's delayed ACK (40 ms), and the pass row measured an idle proxy.
    disable_nagle_algorithm = True

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("Cache-Control", "no-store" if self.path == "/dyn" else "max-age=3600")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A load tool closes its connections when its time is up, mid-response: not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


Server(("127.0.0.1", int(sys.argv[1])), Origin).serve_forever()
