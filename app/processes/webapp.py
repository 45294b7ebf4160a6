"""The web application: `create_app(settings)` builds FastAPI with the webhook intake, /healthz, /metrics
and the dashboard, and (in `serve`) queue consumers that live and stop with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse

from app import dashboard
from app.config import ConfigError, Settings
from app.dashboard.deps import api_viewer
from app.github import METRICS as GITHUB_METRICS
from app.processes.task_queue import Queue, make_queue, start_consumer, stop_consumer
from app.service.services import Services
from app.store.session import ping, session_scope
from app.webhooks import ROUTER
from app.webhooks.batching import GroupCommit
from app.webhooks.intake import Intake
from app.webhooks.intake import router as intake_router

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
EMBEDDED_WORKER_NICENESS = 10  # jobs wait a little; GitHub's deliveries should not


def create_app(settings: Settings, *, services: Services | None = None, queue: Queue | None = None,
               workers: int = 0) -> FastAPI:
    """The app; WORKERS > 0 runs that many queue consumer threads while it lives (`serve`), behind the
    intake: at a lower scheduling priority, and pausing between jobs while deliveries arrive."""
    if settings.github_webhook_secret is None:
        raise ConfigError("GITHUB_WEBHOOK_SECRET must be set")
    services = services or Services.from_settings(settings)
    queue = queue or make_queue(services)

    intake = Intake(secret=settings.github_webhook_secret.get_secret_value().encode(),
                    writing=services.writing, enqueue=queue.enqueue_delivery, router=ROUTER,
                    metrics=services.metrics)
    writer = GroupCommit(intake.store)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        writer.start()
        consumer = None
        if workers:
            consumer = await run_in_threadpool(start_consumer, services, queue, workers=workers,
                                               niceness=EMBEDDED_WORKER_NICENESS, intake_busy=writer.busy)
        try:
            yield
        finally:
            await run_in_threadpool(writer.stop)  # answers the deliveries already received
            if consumer is not None:  # let the jobs in hand finish
                await run_in_threadpool(stop_consumer, consumer)

    # /docs is the dashboard's own page (app/dashboard/apidocs.py): FastAPI's loads Swagger UI from a CDN
    app = FastAPI(title="prtriage", summary="PR risk triage: a GitHub App", lifespan=lifespan, docs_url=None,
                  redoc_url=None)
    app.state.services = services
    app.state.queue = queue
    app.state.intake = intake
    app.state.intake_writer = writer
    app.include_router(intake_router)
    app.include_router(operations)
    dashboard.attach(app)
    return app


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def get_queue(request: Request) -> Queue:
    queue: Queue = request.app.state.queue
    return queue


ServicesDep = Annotated[Services, Depends(get_services)]
QueueDep = Annotated[Queue, Depends(get_queue)]
operations = APIRouter()


def _database_ok(services: Services) -> bool:
    try:
        with session_scope(services.sessions, read_only=True) as session:
            ping(session)
    except Exception:
        return False
    return True


@operations.get("/healthz")
def healthz(services: ServicesDep, queue: QueueDep) -> JSONResponse:
    """200 when the database and the queue answer, else 503 naming which does not."""
    checks = {"database": _database_ok(services), "queue": queue.depth()[0] is not None}
    status = 200 if all(checks.values()) else 503
    body = {"status": "ok" if status == 200 else "unavailable",
            **{name: "ok" if ok else "unreachable" for name, ok in checks.items()}}
    return JSONResponse(body, status_code=status)


# The dashboard's auth: a bearer token or a login with DASHBOARD_TOKEN, else loopback clients only.
@operations.get("/metrics", response_class=PlainTextResponse, dependencies=[Depends(api_viewer)])
def metrics(services: ServicesDep, queue: QueueDep) -> PlainTextResponse:
    waiting, scheduled = queue.depth()
    exposition = services.metrics.render(queue_depth=waiting, scheduled=scheduled,
                                         github=GITHUB_METRICS.snapshot())
    return PlainTextResponse(exposition, media_type=PROMETHEUS_TEXT)
