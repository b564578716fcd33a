"""A local HTTP server that serves fixed pages and counts requests per path: the network of the full-text tests."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class PageServer:
    """Serves `pages` (path -> (status, content type, body)) on 127.0.0.1, 404 for any other path.

    `url` is its base address; `requests` counts GETs per path. Call `close()` when done.
    """

    def __init__(self, pages: dict[str, tuple[int, str, bytes]]):
        self.requests: dict[str, int] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                owner.requests[self.path] = owner.requests.get(self.path, 0) + 1
                status, kind, body = pages.get(self.path, (404, "text/plain", b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
