"""A threaded WSGI server on loopback, for the embedded default.

The demo operates common-engine entrants whose systems must reach the gateway over HTTP, as
an outside entrant's would; without a web server running yet, this serves the site from a
thread of the same process on 127.0.0.1 and an ephemeral port.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - wsgiref's signature
        return


@contextlib.contextmanager
def serving() -> Iterator[str]:
    """Serve the Django site on loopback for the duration of the block; yield its base URL."""
    from django.core.wsgi import get_wsgi_application

    server = make_server(
        "127.0.0.1",
        0,
        get_wsgi_application(),
        server_class=_ThreadingWSGIServer,
        handler_class=_QuietHandler,
    )
    thread = threading.Thread(target=server.serve_forever, name="duel-local-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
