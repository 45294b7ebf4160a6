"""GitHub's App manifest flow: where a browser posts a manifest to register an App, and the exchange of the
temporary code GitHub hands back for the new App's id, key and webhook secret.

https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from app.github.errors import GitHubError

# what GitHub's description requires of the answer; `slug` is optional and `webhook_secret` nullable there
CONVERSION_FIELDS = ("id", "name", "html_url", "pem")
_CODE = re.compile(r"[A-Za-z0-9_-]{1,100}")


def web_url(api_url: str) -> str:
    """The web host of an API: github.com for api.github.com, the GHES host for `https://host/api/v3`, and
    the API's own origin otherwise (a GitHub that serves its API at its root)."""
    parts = urlsplit(api_url.rstrip("/"))
    if parts.netloc.lower() == "api.github.com":
        return f"{parts.scheme}://github.com"
    return f"{parts.scheme}://{parts.netloc}"


def registration_url(api_url: str, organization: str | None = None) -> str:
    """Where the manifest form posts: the personal account's new-App page, or the organization's."""
    if organization:
        return f"{web_url(api_url)}/organizations/{quote(organization, safe='')}/settings/apps/new"
    return f"{web_url(api_url)}/settings/apps/new"


def convert_manifest(api_url: str, code: str, *, timeout: float = 30.0) -> dict[str, Any]:
    """`POST /app-manifests/{code}/conversions` (no authentication: the code is the credential, valid for
    an hour and once): the new App, with `pem` and `webhook_secret`."""
    if not _CODE.fullmatch(code):
        raise GitHubError("apps/create-from-manifest", None, "not a manifest code")
    url = f"{api_url.rstrip('/')}/app-manifests/{code}/conversions"
    try:
        answer = httpx.post(url, headers={"Accept": "application/vnd.github+json",
                                          "X-GitHub-Api-Version": "2022-11-28"}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise GitHubError("apps/create-from-manifest", None, type(exc).__name__) from None
    if answer.status_code != 201:
        raise GitHubError("apps/create-from-manifest", answer.status_code, _message(answer))
    app = answer.json()
    missing = [name for name in CONVERSION_FIELDS if not isinstance(app, dict) or not app.get(name)]
    if missing:
        raise GitHubError("apps/create-from-manifest", answer.status_code, f"answer lacks {missing}")
    return dict(app)


def _message(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return ""
    return str(body.get("message", ""))[:200] if isinstance(body, dict) else ""
