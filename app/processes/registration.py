"""The App registered through the manifest flow, kept in PRTRIAGE_DATA_DIR: the manifest `serve` offers in
setup mode, the credentials GitHub hands back stored (owner-only files), and read again at every start.

Settings from the environment win: the stored App fills in only when none of GITHUB_APP_ID,
GITHUB_PRIVATE_KEY(_PATH) and GITHUB_WEBHOOK_SECRET is set.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr

from app.bundled import package_file
from app.config import ConfigError, Settings

# A copy of the repository's app.yml, kept identical by a test: the package carries what serve offers.
MANIFEST = package_file("app", "app.yml")
APP_FILE = "github-app.json"
KEY_FILE = "github-app.pem"
OWNER_ONLY = 0o600


@dataclass(frozen=True)
class Registration:
    """What the service keeps of the App GitHub created: no client secret, which it never uses."""

    app_id: int
    slug: str
    name: str
    html_url: str
    owner: str

    @property
    def install_url(self) -> str:
        return f"{self.html_url.rstrip('/')}/installations/new"


def manifest(base_url: str) -> dict[str, Any]:
    """app.yml with this service's addresses: webhooks to BASE_URL/webhooks/github, and GitHub's redirect
    after the registration to BASE_URL/setup/callback."""
    document: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    base = base_url.rstrip("/")
    document["hook_attributes"] = {**document.get("hook_attributes", {}), "url": f"{base}/webhooks/github"}
    document["redirect_url"] = f"{base}/setup/callback"
    return document


def unregistered(settings: Settings) -> bool:
    """No App at all: neither from the environment nor from the data directory."""
    return (settings.github_app_id is None and settings.github_private_key is None
            and settings.github_private_key_path is None and settings.github_webhook_secret is None)


def _write_owner_only(path: Path, text: str) -> None:
    """Written whole under a temporary name, created 0600 (never readable by others, not even briefly),
    then renamed into place."""
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def save(data_dir: Path, conversion: dict[str, Any]) -> Registration:
    """Store the answer of the manifest conversion: the key and the webhook secret in owner-only files."""
    data_dir.mkdir(parents=True, exist_ok=True)
    owner = conversion.get("owner") if isinstance(conversion.get("owner"), dict) else {}
    registration = Registration(int(conversion["id"]), str(conversion.get("slug") or ""),
                                str(conversion["name"]), str(conversion["html_url"]),
                                str((owner or {}).get("login", "")))
    secret = conversion.get("webhook_secret")  # null in GitHub's schema when the App has none
    _write_owner_only(data_dir / KEY_FILE, str(conversion["pem"]))
    _write_owner_only(data_dir / APP_FILE, json.dumps({
        "id": registration.app_id, "slug": registration.slug, "name": registration.name,
        "html_url": registration.html_url, "owner": registration.owner,
        "webhook_secret": None if secret is None else str(secret)}, indent=2) + "\n")
    return registration


def load(data_dir: Path) -> tuple[Registration, SecretStr | None] | None:
    """The stored App and its webhook secret (None when GitHub gave none); None when none is stored."""
    path = data_dir / APP_FILE
    try:
        stored = json.loads(path.read_text())
        registration = Registration(int(stored["id"]), str(stored.get("slug") or ""), str(stored["name"]),
                                    str(stored["html_url"]), str(stored.get("owner", "")))
        secret = None if stored["webhook_secret"] is None else SecretStr(str(stored["webhook_secret"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a stored App registration ({type(exc).__name__}); move it away to "
                          "register again") from None
    if not (data_dir / KEY_FILE).is_file():
        raise ConfigError(f"{data_dir / KEY_FILE}: missing beside {path}")
    return registration, secret


def with_registration(settings: Settings) -> Settings:
    """SETTINGS with the App stored in its data directory, when the environment names no App (its webhook
    secret may come from GITHUB_WEBHOOK_SECRET, for an App GitHub created without one)."""
    if not (unregistered(settings) or _secret_alone(settings)):
        return settings
    stored = load(settings.data_dir)
    if stored is None:
        return settings
    registration, secret = stored
    return settings.model_copy(update={"github_app_id": registration.app_id,
                                       "github_private_key_path": settings.data_dir / KEY_FILE,
                                       "github_webhook_secret": secret or settings.github_webhook_secret})


def _secret_alone(settings: Settings) -> bool:
    return (settings.github_app_id is None and settings.github_private_key is None
            and settings.github_private_key_path is None)
