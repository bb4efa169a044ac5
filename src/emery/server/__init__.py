"""``emery server``: the REST API, live events, OTLP ingest and the dashboard, with the LM
proxy (``emery.proxy``) mounted beside them."""

from emery.server.api import create_server_app

__all__ = ["create_server_app"]
