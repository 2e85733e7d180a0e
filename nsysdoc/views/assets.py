"""What every page of nsysdoc shares beside its data: the static files shipped in the package
(``static/report.css``, ``report.js``), the Content-Security-Policy that lets only the inlined
script run, and the one way a page links to a file, an anchor or a web page (percent-encoded;
``https:`` only to NVIDIA's and PyTorch's documentation).

Split from ``views/build.py`` (issue 51): the report, diff, job and index pages all use these, and
they hold no report content.
"""
from __future__ import annotations

import base64
import hashlib
from importlib.resources import files
from urllib.parse import quote, urlsplit

#: the only hosts an ``https:`` link of a page may point to (NVIDIA's and PyTorch's documentation)
LINK_HOSTS = ("docs.nvidia.com", "developer.nvidia.com", "pytorch.org", "docs.pytorch.org")


def path_href(path: str) -> str:
    """A link to a file, relative to the page (or absolute), for an ``href``: percent-encoded
    (``quote``, only ``/`` and unreserved characters kept), so no part of a file name — ``:``
    (``javascript:…``, ``data:…``), ``#``, ``?``, ``%``, quotes, ``<`` — can make it a scheme, a
    fragment or a query; never ``//`` first (a link to another host)."""
    q = quote(str(path), safe="/")
    return "/" + q.lstrip("/") if q.startswith("//") else q


def anchor_href(name: str) -> str:
    """``#name``, percent-encoded: a link inside the page."""
    return "#" + quote(str(name), safe="")


def safe_href(url: str) -> str | None:
    """An ``href`` for ``url`` when its scheme and host are allowed, percent-encoded; else None
    (show it as text). Allowed: ``#anchors`` and ``https:`` links to :data:`LINK_HOSTS` (and
    their subdomains). Files are linked with :func:`path_href`, which never yields a scheme."""
    text = str(url)
    if text.startswith("#"):
        return anchor_href(text[1:])
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if parts.scheme.lower() != "https" or parts.username or parts.password or parts.port is not None:
        return None
    if not any(host == h or host.endswith("." + h) for h in LINK_HOSTS):
        return None
    out = f"https://{host}{quote(parts.path, safe='/') or '/'}"
    if parts.query:
        out += "?" + quote(parts.query, safe="=&")
    if parts.fragment:
        out += "#" + quote(parts.fragment, safe="")
    return out


def _static(name: str) -> str:
    return (files("nsysdoc.views") / "static" / name).read_text(encoding="utf-8")


def csp_for(js: str) -> str:
    """Nothing may load; only the inlined script (matched by its hash) may run."""
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'")
