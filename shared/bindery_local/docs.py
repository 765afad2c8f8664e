"""Swagger UI at /docs on the local stack, from files on this machine (the `swagger-ui-bundle-v2` wheel):
the page works with no network but localhost. Its OpenAPI document is the checked-in one, pointed at the
stack it is served from."""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path

PAGE = b"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Bindery API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" href="/docs/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/docs/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      // A token from the banner (or `bindery token NAME`) goes in Authorize; it is kept for this tab only.
      persistAuthorization: false,
    });
  </script>
</body>
</html>
"""
ASSETS = frozenset({"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png"})

Answer = tuple[int, dict[str, str], bytes]


def _assets() -> Path | None:
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    return Path(str(swagger_ui_path))


def answer(path: str) -> Answer | None:
    """What /docs and its files answer; None for any other path."""
    if path in ("/docs", "/docs/"):
        return 200, {"Content-Type": "text/html; charset=utf-8"}, PAGE
    if path == "/docs/openapi.json":
        from bindery.openapi import document

        spec = document()
        spec["servers"] = [{"url": "/", "description": "this local stack"}]
        return 200, {"Content-Type": "application/json"}, json.dumps(spec).encode()
    name = path.removeprefix("/docs/")
    if not path.startswith("/docs/") or name not in ASSETS:
        return None
    root = _assets()
    if root is None:
        message = b"Swagger UI's files are not installed: make run installs them (pip: swagger-ui-bundle-v2)"
        return 503, {"Content-Type": "text/plain; charset=utf-8"}, message
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return 200, {"Content-Type": kind, "Cache-Control": "max-age=3600"}, (root / name).read_bytes()
