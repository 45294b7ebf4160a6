"""Settings of the service, from the environment; secrets are SecretStr and never printed.

Read once through `get_settings()`; tests build a `Settings(...)` and override the dependency instead of
mutating globals. Every variable is documented in README ("Settings"); a test fails when one is not.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.trees.cachedir import DEFAULT_MAX_SIZE, parse_size


class ConfigError(Exception):
    """A setting that is missing or wrong; the message names the variable."""


class UsageError(Exception):
    """Command-line options or inputs that do not go together; exit status 2."""


class StartupError(Exception):
    """Something the service needs is not there (an unreachable database…); the message names it."""


def _xdg(variable: str, fallback: str) -> Path:
    base = os.environ.get(variable) or str(Path.home() / fallback)
    return Path(base) / "prtriage"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", frozen=True, populate_by_name=True)

    github_app_id: int | None = Field(None, alias="GITHUB_APP_ID")
    github_private_key: SecretStr | None = Field(None, alias="GITHUB_PRIVATE_KEY")
    github_private_key_path: Path | None = Field(None, alias="GITHUB_PRIVATE_KEY_PATH")
    github_webhook_secret: SecretStr | None = Field(None, alias="GITHUB_WEBHOOK_SECRET")
    github_api_url: str = Field("https://api.github.com", alias="GITHUB_API_URL")
    database_url: str | None = Field(None, alias="DATABASE_URL")
    queue_url: str | None = Field(None, alias="QUEUE_URL")
    check_name: str = Field("PR risk triage", alias="PRTRIAGE_CHECK_NAME")
    dashboard_token: SecretStr | None = Field(None, alias="DASHBOARD_TOKEN")
    resync_seconds: int = Field(900, ge=10, alias="PRTRIAGE_RESYNC_SECONDS")
    # how often each repository's default branch is checked again (a push to it also checks it)
    main_health_seconds: int = Field(86400, ge=60, alias="PRTRIAGE_MAIN_HEALTH_SECONDS")
    data_dir: Path = Field(default_factory=lambda: _xdg("XDG_DATA_HOME", ".local/share"),
                           alias="PRTRIAGE_DATA_DIR")
    cache_dir: Path = Field(default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache"),
                            alias="PRTRIAGE_CACHE_DIR")
    # Bytes; the least recently used entries go when the cache holds more (app/trees/cachedir.py).
    cache_max_size: int = Field(parse_size(DEFAULT_MAX_SIZE), ge=0, alias="PRTRIAGE_CACHE_MAX_SIZE")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", alias="PRTRIAGE_LOG_LEVEL")
    # the address people and GitHub reach the service at, when a proxy stands in front: https means every
    # cookie is Secure, whatever scheme the proxy speaks to the app
    public_url: str | None = Field(None, alias="PRTRIAGE_PUBLIC_URL")
    host: str = Field("127.0.0.1", alias="PRTRIAGE_HOST")
    port: int = Field(8000, ge=1, le=65535, alias="PRTRIAGE_PORT")
    # Queue consumers: threads of `serve` (0: none, jobs go to `prtriage worker`s) and of each `worker`.
    workers: int = Field(1, ge=0, le=64, alias="PRTRIAGE_WORKERS")

    @field_validator("cache_max_size", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        return parse_size(value) if isinstance(value, str) else value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("not an http(s) URL (write https://triage.example.com)")
        return value or None

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                backend = make_url(value).get_backend_name()
            except ArgumentError:
                backend = None  # never the value in the message: it may hold a password
            if backend not in ("postgresql", "sqlite"):
                raise ValueError("not a PostgreSQL or SQLite URL (write postgresql://user:password@host:5432/"
                                 "name or sqlite:////absolute/path.db)")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> Settings:
        if self.github_private_key and self.github_private_key_path:
            raise ValueError("set GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH, not both")
        return self

    def secure_cookies(self, request_scheme: str) -> bool:
        """Cookies are Secure when the request came over https, or the public address is https (behind a
        proxy that speaks http to the app)."""
        return request_scheme == "https" or urlsplit(self.public_url or "").scheme == "https"

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'prtriage.db'}"

    @property
    def effective_queue_url(self) -> str:
        return self.queue_url or f"sqlite:///{self.data_dir / 'queue.db'}"

    def private_key(self) -> str:
        """The App's PEM key; a clear error naming the variables when it is missing or unreadable."""
        if self.github_private_key is not None:
            return self.github_private_key.get_secret_value()
        if self.github_private_key_path is not None:
            try:
                return self.github_private_key_path.read_text()
            except OSError as exc:
                raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH: cannot read {self.github_private_key_path}: "
                                  f"{exc.strerror}") from None
        raise ConfigError("GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH must be set")

    def require_app(self) -> None:
        """Start-up check of what the GitHub side needs: fail now, not on the first webhook."""
        missing = [name for name, value in (("GITHUB_APP_ID", self.github_app_id),
                                            ("GITHUB_WEBHOOK_SECRET", self.github_webhook_secret))
                   if value is None]
        if missing:
            raise ConfigError(f"missing setting(s): {', '.join(missing)}")
        self.private_key()


class CommandLineSettings(BaseSettings):
    """The settings of the local commands (README, "Settings of the command line"), read as `prtriage` starts.

    Kept as given and checked by the command that uses each (`cache prune` its size, `demo` its port), so a
    bad value fails only that command, with the variable's name; the log level is every command's. Its
    default is WARNING, where the service's (`Settings.log_level`) is INFO: a check's output is its report.
    """

    # case-sensitive names, as the environment is on Linux: `prtriage_log_level` is not PRTRIAGE_LOG_LEVEL
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", frozen=True, populate_by_name=True,
                                      case_sensitive=True)

    cache_dir: str | None = Field(None, alias="PRTRIAGE_CACHE_DIR")
    xdg_cache_home: str | None = Field(None, alias="XDG_CACHE_HOME")
    cache_max_size: str | None = Field(None, alias="PRTRIAGE_CACHE_MAX_SIZE")
    log_level: str = Field("WARNING", alias="PRTRIAGE_LOG_LEVEL")
    port: str | None = Field(None, alias="PRTRIAGE_PORT")  # `demo` only: 0 is any free port

    def cache_directory(self, explicit: Path | None = None) -> Path:
        """EXPLICIT (--cache-dir), else PRTRIAGE_CACHE_DIR, else $XDG_CACHE_HOME/prtriage, else
        ~/.cache/prtriage."""
        if explicit is not None:
            return explicit
        if self.cache_dir:
            return Path(self.cache_dir)
        return (Path(self.xdg_cache_home) if self.xdg_cache_home else Path.home() / ".cache") / "prtriage"

    def cache_max_bytes(self) -> int:
        try:
            return parse_size(self.cache_max_size or DEFAULT_MAX_SIZE)
        except ValueError as exc:
            raise UsageError(f"PRTRIAGE_CACHE_MAX_SIZE: {exc}") from None

    def log_level_number(self) -> int:
        name = self.log_level.upper()
        level = logging.getLevelName(name)
        if not isinstance(level, int):
            raise UsageError(f"PRTRIAGE_LOG_LEVEL: unknown level {name!r} (DEBUG, INFO, WARNING, ERROR)")
        return level


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
