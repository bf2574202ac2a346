"""PostgreSQL database URLs (docs/storage.md §10.1), standard library only.

`P` for PostgreSQL is the URL without its password: it is what every message names (the host
and the database), and it is safe to print. The password itself is read from
`CAFLEET_DATABASE_URL` at connect time only, or left to libpq (`PGPASSWORD`, `~/.pgpass`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_SCHEME = re.compile(r"^(postgres(?:ql)?)://", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(r"(^|&)password=[^&]*", re.IGNORECASE)


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme://, netloc, path, query-with-?) of a postgresql URL."""
    m = _SCHEME.match(url)
    prefix = m.group(0) if m else ""
    rest = url[len(prefix) :]
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
        query = "?" + query
    netloc, slash, path = rest.partition("/")
    return prefix, netloc, slash + path, query


def hide_password(url: str) -> str:
    """`url` with the password of its user part replaced by `***` (any scheme)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}"
    tail = _PASSWORD_PARAM.sub(lambda m: m.group(1) + "password=***", tail)
    return f"{scheme}{sep}{netloc}{slash}{tail}"


def _passwords(url: str) -> list[str]:
    """Every password ``url`` carries, as written and percent-decoded: its user part's (up to
    the last `@` before any `?`, so a `/` or `@` inside the password is still found) and each
    `password=` of its query."""
    from urllib.parse import unquote

    rest = url.partition("://")[2].partition("?")[0]
    found: list[str] = []
    for userinfo in (rest.partition("/")[0].rpartition("@")[0], rest.rpartition("@")[0]):
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    found += re.findall(r"(?:^|[?&])password=([^&]*)", url.partition("?")[2], re.IGNORECASE)
    found += [unquote(p) for p in found]
    return sorted({p for p in found if p}, key=len, reverse=True)


def redact(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with every password of ``url`` replaced by
    `***`: libpq quotes a URL it cannot parse whole, password included."""
    for password in _passwords(url):
        text = text.replace(password, "***")
    return text


def display_url(url: str) -> str:
    """`P`: the URL without a password in its user part or its query (never printed)."""
    prefix, netloc, path, query = _split(url)
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        netloc = userinfo.split(":", 1)[0] + "@" + hostport
    if query:
        kept = [
            part
            for part in query[1:].split("&")
            if part and not part.lower().startswith("password=")
        ]
        query = "?" + "&".join(kept) if kept else ""
    return f"{prefix.lower()}{netloc}{path}{query}"


def connect_url(path: str, env: Mapping[str, str] | None = None) -> str:
    """The URL to connect with for `P`: `CAFLEET_DATABASE_URL` when it names this database (it
    may carry the password), else `P` itself (libpq then reads PGPASSWORD or ~/.pgpass)."""
    env = os.environ if env is None else env
    full = env.get("CAFLEET_DATABASE_URL") or ""
    if full and display_url(full) == path:
        return full
    return path


def host_of(path: str) -> str:
    """The host part of `P` (`host[:port]`), for messages; `localhost` when the URL has none."""
    _prefix, netloc, _path, query = _split(path)
    hostport = netloc.rpartition("@")[2]
    if not hostport:
        m = re.search(r"(?:^|[?&])host=([^&]*)", query)
        hostport = m.group(1) if m else "localhost"
    return hostport


def _sha256(data: bytes) -> Any:
    """`hashlib.sha256`, from CPython's own module when there is one: hashlib's OpenSSL import
    costs about 2 ms, a tenth of what a short command adds to its imports on PostgreSQL."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    return sha256(data)


_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def state_dir(home: str, path: str) -> str:
    """`$HOME/.local/share/cafleet/pg-<host>-<database>-<hash>`: this host's local state for
    database `P` (pane locks, monitor logs and holds); one directory per database."""
    _prefix, netloc, dbpath, _query = _split(path)
    hostport = netloc.rpartition("@")[2] or "local"
    name = _UNSAFE.sub("_", f"{hostport}-{dbpath.lstrip('/') or 'db'}").strip("_")[:60]
    digest = _sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return os.path.join(home, ".local", "share", "cafleet", f"pg-{name}-{digest}")


__all__ = ["connect_url", "display_url", "hide_password", "host_of", "redact", "state_dir"]
