"""The local GitHub's side of the App manifest flow: the new-App page a manifest form posts to (it registers
at once, as if the person clicked "Create GitHub App", and redirects with a code), and the conversion of that
code into the App's id, key and webhook secret, after which the fake is that App (its key signs the JWTs).

GitHub's REST description subset has no entry for the conversion: its answer follows GitHub's documentation
(`apps/create-from-manifest`): the App as `GET /app` shows it, plus `client_id`, `client_secret`,
`webhook_secret` and `pem`. A code is good once, for an hour.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from app.demo.localgithub import rest_shapes
from app.demo.localgithub.keys import AppKey, make_app_key
from app.demo.localgithub.rest_routes import Call, Reply, not_found

if TYPE_CHECKING:
    from app.demo.localgithub.server import FakeGitHub

NEW_APP = re.compile(r"/(?:organizations/(?P<org>[A-Za-z0-9-]+)/)?settings/apps/new")
CODE_SECONDS = 3600


@dataclass
class PendingApp:
    """An App created from a manifest, waiting for its code to be converted."""

    app_id: int
    slug: str
    name: str
    owner: str
    manifest: dict[str, Any]
    key: AppKey
    webhook_secret: str
    created: float


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "app"


def new_app_page(fake: FakeGitHub, path: str, query: dict[str, str], raw: bytes) -> Reply | None:
    """POST of a manifest form to /settings/apps/new (or an organization's): a 302 to the manifest's
    redirect_url with `code` and the `state` given; None for paths that are not the new-App page."""
    match = NEW_APP.fullmatch(path)
    if match is None:
        return None
    fields = parse_qs(raw.decode(errors="replace"))
    try:
        manifest = json.loads(fields["manifest"][0])
        redirect = str(manifest["redirect_url"])
        hook_url = str(manifest["hook_attributes"]["url"])
    except (KeyError, IndexError, ValueError, TypeError):
        return Reply(422, raw=b"Invalid GitHub App configuration: the manifest needs redirect_url and "
                              b"hook_attributes.url", headers={"Content-Type": "text/plain"})
    if {urlsplit(redirect).scheme, urlsplit(hook_url).scheme} - {"http", "https"}:
        return Reply(422, raw=b"Invalid GitHub App configuration: URLs must be http(s)",
                     headers={"Content-Type": "text/plain"})
    name = str(manifest.get("name") or "app")
    code = secrets.token_hex(10)
    fake.manifest_codes[code] = PendingApp(fake.next_id(), _slug(name), name, match.group("org") or "octocat",
                                           manifest, make_app_key(), secrets.token_hex(20), time.time())
    given = {"code": code, **({"state": query["state"]} if "state" in query else {})}
    joiner = "&" if urlsplit(redirect).query else "?"
    return Reply(302, headers={"Location": f"{redirect}{joiner}{urlencode(given)}"}, raw=b"")


def convert(fake: FakeGitHub, call: Call) -> Reply:
    """POST /app-manifests/{code}/conversions."""
    pending = fake.manifest_codes.pop(call.params["code"], None)
    if pending is None or time.time() - pending.created > CODE_SECONDS:
        return not_found()
    fake.key, fake.app_id, fake.app_slug = pending.key, pending.app_id, pending.slug
    body = rest_shapes.app(fake.url, pending.app_id, pending.slug)
    body.update(name=pending.name, owner=rest_shapes.user(fake.url, pending.owner),
                description=pending.manifest.get("description", ""),
                external_url=pending.manifest.get("url", ""),
                permissions=pending.manifest.get("default_permissions", {}),
                events=pending.manifest.get("default_events", []),
                client_id=f"Iv1.{secrets.token_hex(8)}", client_secret=secrets.token_hex(20),
                webhook_secret=pending.webhook_secret, pem=pending.key.private_pem)
    fake.registered_manifests.append(pending.manifest)
    return Reply(201, body)
