"""`--url A[,B...]`: running servers named by their base URL (the headless bench's and smoke's targets without
a profile), checked here once, and the name each has in results (host:port)."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_list(text: str) -> list[str]:
    """`--url A[,B...]`: each an http(s) base URL; ValueError names the one that is not."""
    out = []
    for u in (x.strip().rstrip("/") for x in text.split(",")):
        if not u:
            continue
        p = urlsplit(u)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ValueError(f"--url {u!r}: expected http://HOST:PORT (e.g. http://127.0.0.1:30000)")
        if p.path not in ("", "/"):
            raise ValueError(f"--url {u!r}: give the server's base URL, without a path")
        out.append(u)
    if not out:
        raise ValueError("--url is empty")
    if len(set(out)) != len(out):
        raise ValueError(f"a URL is listed twice: {', '.join(out)}")
    return out


def url_ref(url: str) -> str:
    """The name a --url target has in the results: host:port."""
    return urlsplit(url).netloc
