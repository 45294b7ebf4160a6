"""Who may see the dashboard: a bearer token, a signed session cookie from the login form, or (with no
DASHBOARD_TOKEN configured) a loopback client; and the CSRF token tied to a login session.

The session key is derived from DASHBOARD_TOKEN, so changing the token logs every session out and there is
no second secret to configure. Every comparison of secrets goes through `hmac.compare_digest`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass
from typing import Literal

SESSION_COOKIE = "prtriage_session"
SESSION_SECONDS = 12 * 3600
CLOCK_SKEW_SECONDS = 60
LOOPBACK_NAMES = frozenset({"localhost"})

Via = Literal["bearer", "cookie", "loopback"]


@dataclass(frozen=True)
class Viewer:
    """An allowed reader; `session_id` and `csrf` are set for cookie logins (their forms carry the token)."""

    via: Via
    session_id: str | None = None
    csrf: str = ""

    @property
    def can_close(self) -> bool:
        # Closing needs the login; an unprotected loopback dashboard is read-only.
        return self.via != "loopback"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def same_secret(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class Gate:
    """Checks credentials against one configured token; issues and verifies session cookies."""

    def __init__(self, token: str) -> None:
        self._token = token
        self._key = hmac.new(token.encode(), b"prtriage dashboard session", hashlib.sha256).digest()

    def bearer_ok(self, authorization: str | None) -> bool:
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and bool(given) and same_secret(given.strip(), self._token)

    def token_ok(self, given: str) -> bool:
        return bool(given) and same_secret(given, self._token)

    def issue(self, *, now: float | None = None) -> str:
        """A new session cookie value: issue time, random session id, signature."""
        payload = f"{int(now if now is not None else time.time())}.{secrets.token_urlsafe(18)}"
        return f"{payload}.{self._sign(payload)}"

    def session_id(self, cookie: str | None, *, now: float | None = None) -> str | None:
        """The session id of a valid, unexpired cookie; None for anything else."""
        issued_text, _, rest = (cookie or "").partition(".")
        session_id, _, signature = rest.partition(".")
        if not (issued_text.isdigit() and session_id and signature):
            return None
        if not same_secret(signature, self._sign(f"{issued_text}.{session_id}")):
            return None
        age = (now if now is not None else time.time()) - int(issued_text)
        return session_id if -CLOCK_SKEW_SECONDS <= age <= SESSION_SECONDS else None

    def csrf_token(self, session_id: str) -> str:
        return self._sign(f"csrf.{session_id}")

    def csrf_ok(self, session_id: str, given: str | None) -> bool:
        return bool(given) and same_secret(given or "", self.csrf_token(session_id))

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())


def is_loopback_client(client_host: str | None) -> bool:
    try:
        return client_host is not None and ipaddress.ip_address(client_host).is_loopback
    except ValueError:
        return False


def is_loopback_host(hostname: str | None) -> bool:
    """The Host the browser asked for names this machine; refuses DNS-rebinding names that resolve here."""
    if not hostname:
        return False
    return hostname.lower() in LOOPBACK_NAMES or is_loopback_client(hostname.strip("[]"))


def safe_next(target: str | None) -> str:
    """A local path to return to after login; anything else (another origin, `//host`) goes to `/`."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
