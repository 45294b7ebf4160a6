"""Who the App is to GitHub: its JWT (signed by PyGithub, backdated 60 s) and the installation tokens it
buys with it, cached per installation until shortly before they expire."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from github import Auth

from app.config import ConfigError, Settings
from app.github.errors import GitHubError
from app.github.rest import Rest, repo_path
from app.github.retry import RetryPolicy

log = logging.getLogger(__name__)

# GitHub's advice against clock drift; PyGithub puts it into `iat`.
JWT_BACKDATE_SECONDS = 60
JWT_LIFETIME_SECONDS = 300
# A token is renewed this long before it expires, so that no request (nor a long rate-limit wait before a
# retry) ever carries one that dies on the way.
TOKEN_MARGIN = timedelta(minutes=5)


class AppCredentials:
    """The App id and its private key; signs JWTs and never shows the key (repr, str, errors)."""

    def __init__(self, app_id: int, private_key: str) -> None:
        self.app_id = app_id
        self.auth = Auth.AppAuth(app_id, private_key, jwt_expiry=JWT_LIFETIME_SECONDS,
                                 jwt_issued_at=-JWT_BACKDATE_SECONDS)
        self.jwt()  # a key that cannot sign is a start-up error, not a failure on the first webhook

    def jwt(self) -> str:
        try:
            return self.auth.create_jwt()
        except Exception:
            # the library's message could quote key material; ours names the setting instead
            raise ConfigError("GITHUB_PRIVATE_KEY: not an RSA private key in PEM form") from None

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id})"


@dataclass(frozen=True)
class InstallationToken:
    installation_id: int
    value: str = field(repr=False)
    expires_at: datetime


class InstallationTokens:
    """Installation tokens by installation id, shared by every client of one App; thread-safe.

    MINT buys a new token; one installation's token is minted once even when many threads ask at once.
    """

    def __init__(self, mint: Callable[[int], InstallationToken], *, margin: timedelta = TOKEN_MARGIN,
                 clock: Callable[[], float] = time.time) -> None:
        self._mint = mint
        self._margin = margin.total_seconds()
        self._clock = clock
        self._tokens: dict[int, InstallationToken] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, installation_id: int) -> str:
        with self._guard:
            lock = self._locks.setdefault(installation_id, threading.Lock())
        with lock:
            token = self._tokens.get(installation_id)
            if token is None or token.expires_at.timestamp() - self._margin <= self._clock():
                token = self._mint(installation_id)
                self._tokens[installation_id] = token
                log.info("installation %d: new token, expires %s", installation_id,
                         token.expires_at.isoformat())
            return token.value

    def forget(self, installation_id: int) -> None:
        """Drop a token GitHub refused (revoked, or expired early by clock skew)."""
        with self._guard:
            self._tokens.pop(installation_id, None)

    def __repr__(self) -> str:
        return f"InstallationTokens(installations={sorted(self._tokens)})"


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class GitHubApp:
    """The App: its JWT, its installations' tokens, the endpoints that speak to the App itself.

    One per process and App; clients of installations (`GitHubClient(app, installation_id)`) share its
    token cache, retry policy and metrics. API_URL may be a GitHub Enterprise base such as
    `https://ghe.example/api/v3`.
    """

    def __init__(self, app_id: int, private_key: str, *, api_url: str = "https://api.github.com",
                 policy: RetryPolicy | None = None, token_margin: timedelta = TOKEN_MARGIN,
                 clock: Callable[[], float] = time.time, timeout: int = 30) -> None:
        self.credentials = AppCredentials(app_id, private_key)
        self.api_url = api_url.rstrip("/")
        self.policy = policy or RetryPolicy()
        self.timeout = timeout
        self.tokens = InstallationTokens(self._mint_token, margin=token_margin, clock=clock)
        self._rest = Rest(self.api_url, self.credentials.auth, self.policy, timeout=timeout)
        self._slug: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> GitHubApp:
        if settings.github_app_id is None:
            raise ConfigError("GITHUB_APP_ID must be set")
        return cls(settings.github_app_id, settings.private_key(), api_url=settings.github_api_url, **options)

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.credentials.app_id}, api_url={self.api_url!r})"

    def installation_token(self, installation_id: int) -> str:
        return self.tokens.get(installation_id)

    def app_slug(self) -> str:
        """The App's slug, from GET /app (asked once). GitHub's description makes it optional: without it the
        App's bot login is unknown, which is said rather than guessed."""
        if self._slug is None:
            _, app = self._rest.request("apps/get-authenticated", "GET", "/app")
            slug = app.get("slug") if isinstance(app, dict) else None
            if not isinstance(slug, str) or not slug:
                raise GitHubError("apps/get-authenticated", 200,
                                  "GET /app named no slug: the App's bot login is unknown")
            self._slug = slug
        return self._slug

    def app_login(self) -> str:
        """The login of the App's bot user, the author of everything the App posts."""
        return f"{self.app_slug()}[bot]"

    def installation_for(self, owner: str, repo: str) -> int:
        """The id of the App's installation on OWNER/REPO (NotFound when the App is not installed there)."""
        _, installation = self._rest.request("apps/get-repo-installation", "GET",
                                             f"{repo_path(owner, repo)}/installation")
        return int(installation["id"])

    def _mint_token(self, installation_id: int) -> InstallationToken:
        _, answer = self._rest.request("apps/create-installation-access-token", "POST",
                                       f"/app/installations/{int(installation_id)}/access_tokens")
        expires_at = _parse_time(str(answer["expires_at"]))
        return InstallationToken(installation_id, str(answer["token"]), expires_at)

    def close(self) -> None:
        self._rest.close()
