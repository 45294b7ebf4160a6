"""The service's processes: `serve` (web app and queue consumers), `worker` (consumers alone), `db upgrade`
and `replay`. Each checks its configuration at start-up, so that a missing secret or an unmigrated database
is a clear error (exit 2 or 3) and not a crash on the first webhook."""

from __future__ import annotations

import errno
import gc
import hashlib
import hmac
import json
import logging
import signal
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp

from app import dashboard
from app.analysis.core.explain import describe
from app.config import ConfigError, Settings, StartupError
from app.github import GitHubApp
from app.github.manifest import web_url
from app.logsetup import quiet_libraries
from app.processes.registration import unregistered, with_registration
from app.processes.setupmode import Switch, create_setup_app
from app.processes.slow_clients import HeaderDeadlineProtocol
from app.processes.task_queue import make_huey, make_queue, start_consumer, stop_consumer
from app.processes.webapp import create_app
from app.service.services import Services
from app.store.migrate import current_revision, head_revision, upgrade
from app.webhooks import ROUTER
from app.webhooks.intake import Answer, Intake

log = logging.getLogger(__name__)


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment (the App from the data directory when the environment names none,
    app/processes/registration.py); a bad value is a ConfigError naming the variable, never its value
    (it may be a secret)."""
    try:
        return with_registration(Settings(**{name: value for name, value in overrides.items()
                                             if value is not None}))
    except ValidationError as exc:
        problems = "; ".join(f"{_variable(error['loc'])}: {describe(error)}" for error in exc.errors())
        raise ConfigError(problems) from None


def _variable(loc: tuple[int | str, ...]) -> str:
    """The environment variable a setting's error is about (a field's name when it came as an override)."""
    if not loc:
        return "settings"
    field = Settings.model_fields.get(str(loc[0]))
    return field.alias if field is not None and field.alias else str(loc[0])


def database_label(settings: Settings) -> str:
    return make_url(settings.effective_database_url).render_as_string(hide_password=True)


def queue_label(settings: Settings) -> str:
    url = settings.effective_queue_url
    if url.startswith("sqlite"):
        return url
    parsed = httpx.URL(url)
    return str(parsed.copy_with(password="***")) if parsed.password else str(parsed)


def ensure_schema(settings: Settings) -> None:
    """The embedded SQLite database is migrated here; a server database must be migrated already."""
    url = settings.effective_database_url
    try:
        if settings.database_url is None:
            upgrade(url)
            return
        current, head = current_revision(url), head_revision()
    except SQLAlchemyError as exc:
        raise StartupError(f"database {database_label(settings)}: {type(exc).__name__}: "
                           f"{str(getattr(exc, 'orig', None) or 'unreachable').splitlines()[0]}") from None
    if current != head:
        raise ConfigError(f"the database is at revision {current or '(none)'}, the code needs {head}: run "
                          "`prtriage db upgrade`")


def warn_if_key_exposed(settings: Settings) -> None:
    """A key file other users may read lets them act as the App on every installation: say so (the service
    still starts: the operator may have reasons, such as a group of its own)."""
    path = settings.github_private_key_path
    try:
        mode = path.stat().st_mode & 0o777 if path is not None else 0
    except OSError:
        return  # unreadable: require_app has said so already
    if mode & 0o077:
        log.warning("GITHUB_PRIVATE_KEY_PATH %s has mode %04o: other users of this machine can read the "
                    "App's key; make it readable by the service's user alone (chmod 0600)", path, mode)


def prepare(settings: Settings) -> Services:
    """Everything a process that runs jobs needs, checked now: App id, key (it must sign), secret, schema."""
    if unregistered(settings):
        raise ConfigError("no GitHub App: set GITHUB_APP_ID, GITHUB_PRIVATE_KEY_PATH and "
                          "GITHUB_WEBHOOK_SECRET, or register one with `prtriage serve` (setup mode) in "
                          f"PRTRIAGE_DATA_DIR {settings.data_dir}")
    settings.require_app()
    warn_if_key_exposed(settings)
    services = Services.from_settings(settings, github_app=GitHubApp.from_settings(settings))
    ensure_schema(settings)
    make_huey(settings)  # an unusable QUEUE_URL is a start-up error too
    return services


def _log_levels(settings: Settings) -> None:
    level = logging.getLevelName(settings.log_level)
    logging.getLogger().setLevel(level)
    quiet_libraries(level)


def settle_memory() -> None:
    """Move everything loaded so far out of the collector's sight: a full collection of the imported
    libraries takes about 100 ms, a pause every few hundred requests that would be their p99."""
    gc.collect()
    gc.freeze()


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to HOST:PORT now (port 0: any free one), before anything is announced: a host that is
    not this machine's is a bad setting (exit 2), a taken port a clear start-up error (exit 3)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"PRTRIAGE_HOST/--host: cannot listen on {host!r}: {exc.strerror}") from None
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"PRTRIAGE_HOST/--host: {host} is not an address of this machine") from None
        raise StartupError(f"port {port} on {host}: {exc.strerror}; choose another with --port") from None
    return listener


def serve(settings: Settings, *, listener: socket.socket | None = None) -> int:
    """Serve until SIGTERM/SIGINT; on LISTENER when given (a socket bound already, e.g. to port 0), else on
    the settings' host and port. Without any App (environment or data directory): setup mode first."""
    _log_levels(settings)
    settings = with_registration(settings)
    # bound before anything is announced: a bad host or a taken port is the one thing said
    bound = listener if listener is not None else listen(settings.host, settings.port)
    base = f"http://{settings.host if ':' not in settings.host else f'[{settings.host}]'}:{settings.port}/"
    running: list[Services] = []  # the service's, once it runs (at once, or after the registration)
    try:
        if unregistered(settings):
            app: ASGIApp = _setup_mode(settings, base, running)
        else:
            running.append(prepare(settings))
            app = create_app(settings, services=running[0], workers=settings.workers)
            _announce(settings, base)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, lifespan="on",
                                log_level=settings.log_level.lower(), timeout_graceful_shutdown=None,
                                access_log=settings.log_level == "DEBUG", http=HeaderDeadlineProtocol)
        settle_memory()
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again for the previous handler:
        # make that a no-op, so a requested stop exits 0 and not by the signal
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: None)
        uvicorn.Server(config).run(sockets=[bound])
    finally:
        for services in running:
            services.close()
        if listener is None:
            bound.close()
    return 0


def _announce(settings: Settings, base: str) -> None:
    print(f"prtriage: {dashboard.startup_notice(settings, base)}", flush=True)
    print(f"prtriage: webhooks {base}webhooks/github; database {database_label(settings)}; queue "
          f"{queue_label(settings)}; {settings.workers} worker thread(s); stop with Ctrl-C or SIGTERM "
          "(jobs in hand finish first)", flush=True)


def _setup_mode(settings: Settings, base: str, running: list[Services]) -> Switch:
    """The setup app, replaced by the service's own once GitHub handed over the new App."""
    async def start_service(registered: Settings) -> None:
        services = await run_in_threadpool(prepare, registered)
        running.append(services)
        await switch.replace(create_app(registered, services=services, workers=registered.workers))
        print("prtriage: the GitHub App is registered and stored in the data directory; serving it",
              flush=True)
        _announce(registered, base)

    switch = Switch(create_setup_app(settings, start_service))
    print(f"prtriage: setup mode: no GitHub App is configured; open {base}setup to register one on "
          f"{web_url(settings.github_api_url)} (the App is then stored in {settings.data_dir})", flush=True)
    return switch


def work(settings: Settings) -> int:
    if settings.workers < 1:
        raise ConfigError("PRTRIAGE_WORKERS: a worker needs at least 1 thread")
    _log_levels(settings)
    services = prepare(settings)
    queue = make_queue(services)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    settle_memory()
    consumer = start_consumer(services, queue, workers=settings.workers)
    print(f"prtriage: worker on queue {queue_label(settings)}, database {database_label(settings)}, "
          f"{settings.workers} thread(s); stop with SIGTERM or Ctrl-C (jobs in hand finish first)",
          flush=True)
    while not stopping.wait(0.5):
        pass
    print("prtriage: stopping: finishing the jobs in hand", flush=True)
    stop_consumer(consumer)
    services.close()
    return 0


def upgrade_database(settings: Settings) -> int:
    try:
        upgrade(settings.effective_database_url)
    except SQLAlchemyError as exc:
        raise StartupError(f"database {database_label(settings)}: {type(exc).__name__}") from None
    print(f"prtriage: database {database_label(settings)} is at revision {head_revision()}")
    return 0


def signed(settings: Settings, file: Path, *, new_delivery_id: bool) -> tuple[dict[str, str], bytes]:
    """The saved delivery's headers and body, signed again with GITHUB_WEBHOOK_SECRET (the saved signature
    covers GitHub's original bytes, which a saved JSON body no longer is)."""
    if settings.github_webhook_secret is None:
        raise ConfigError("GITHUB_WEBHOOK_SECRET must be set to sign the replayed delivery")
    try:
        saved = json.loads(file.read_text())
        headers = {str(name).lower(): str(value) for name, value in saved["headers"].items()}
        body = saved["body"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{file}: not a saved delivery ({{\"headers\": {{…}}, \"body\": …}}): "
                          f"{type(exc).__name__}") from None
    raw = body.encode() if isinstance(body, str) else json.dumps(body, separators=(",", ":")).encode()
    if new_delivery_id or "x-github-delivery" not in headers:
        headers["x-github-delivery"] = str(uuid.uuid4())
    headers.pop("x-hub-signature", None)
    secret = settings.github_webhook_secret.get_secret_value().encode()
    headers["x-hub-signature-256"] = "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()
    headers.pop("content-length", None)
    return headers, raw


def replay(settings: Settings, file: Path, *, url: str | None, new_delivery_id: bool) -> Answer:
    """Feed a saved delivery through the intake: of the service at URL, or in this process (its job then
    waits in the queue for the service's workers)."""
    headers, raw = signed(settings, file, new_delivery_id=new_delivery_id)
    if url is not None:
        response = httpx.post(url, content=raw, headers=headers, timeout=30)
        try:
            body = response.json()
        except ValueError:
            body = {"message": response.text[:500]}
        return Answer(response.status_code, body if isinstance(body, dict) else {"answer": body})
    services = Services.from_settings(settings)
    try:
        ensure_schema(settings)
        queue = make_queue(services)
        secret = settings.github_webhook_secret.get_secret_value().encode() \
            if settings.github_webhook_secret else b""
        intake = Intake(secret=secret, writing=services.writing, enqueue=queue.enqueue_delivery,
                        router=ROUTER, metrics=services.metrics)
        return intake.receive(headers, raw)
    finally:
        services.close()
