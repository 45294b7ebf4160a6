"""POST /webhooks/github: the signature checked on the raw bytes before anything parses them, the delivery
stored once by its GUID, its job queued inside the same transaction, and an answer within milliseconds.

413 a body past 25 MB, whatever its transfer encoding, refused once it passes (the rest unread) · 408 a body
not received within BODY_SECONDS (GitHub gives up after 10 s) · 401 bad or missing signature (nothing
stored; a missing one before the body is read) · 400 missing event or delivery header, malformed JSON, more
JSON values than any delivery holds (counted on the bytes, before a Python object is built), a payload its
event's typed model refuses, a row the database refuses (the rest of its group is stored) · 200 redelivery
or concurrent duplicate (nothing queued), and deliveries ignored by design (ping, events and actions without
a handler; stored as `ignored`) · 202 job queued · 503 the queue (or the database) cannot take it: the row
is rolled back, GitHub shows the failure and the delivery can be redelivered.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic_core
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from app.service.prometheus import ServiceMetrics
from app.store.queries import record_new_deliveries
from app.store.types import utcnow
from app.webhooks.batching import GroupCommit
from app.webhooks.payloads import Envelope
from app.webhooks.router import Ignored, Job, PayloadError, Router, validate

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
PARSE_IN_LOOP_BYTES = 256 * 1024  # a larger body is parsed off the event loop
# An upper bound of the values a JSON text holds is its commas plus its brackets: counted in C on the bytes
# (about 10 ms for 25 MB) before parsing. GitHub's deliveries hold far fewer (a PR's body is at most 65,536
# characters); 24 MB of empty objects hold 8 million, 2.3 GB once parsed.
MAX_JSON_VALUES = 500_000
# Large bodies read and verified at once (the others wait, within BODY_SECONDS): each holds up to 25 MB of
# bytes and builds up to about 50 MB of objects. GitHub's deliveries are nearly all under PARSE_IN_LOOP_BYTES.
LARGE_BODIES = 3
BODY_SECONDS = 10.0  # GitHub waits 10 s for the answer: a body still coming then is a slow client
GUID_CHARS = 64  # the deliveries.guid column
SIGNATURE_HEADER = "x-hub-signature-256"
REDELIVER = "the delivery could not be queued; redeliver it"


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Verified:
    """A delivery whose signature, headers and payload passed: what is stored of it, and what to do."""

    event: str
    guid: str
    action: str | None
    installation_id: int | None
    decision: Job | Ignored

    def row(self) -> dict[str, Any]:
        """The delivery's row: queued with its job's data, or ignored (and done) with the reason."""
        now, decision = utcnow(), self.decision
        row = {"guid": self.guid, "event": self.event, "action": self.action,
               "installation_id": self.installation_id, "received_at": now}
        if isinstance(decision, Job):
            return {**row, "payload_summary": decision.summary(), "status": "queued", "error": None,
                    "processed_at": None}
        return {**row, "payload_summary": {"ignored": decision.reason}, "status": "ignored",
                "error": decision.reason, "processed_at": now}


class QueueDown(Exception):
    """The queue refused a job."""


def unavailable(exc: Exception) -> bool:
    """Whether EXC says the queue or the database is down (GitHub should redeliver), rather than that the
    database refused what one delivery carries."""
    return isinstance(exc, QueueDown | OperationalError | InterfaceError | PoolTimeout)


def json_values_bound(body: bytes) -> int:
    """At least the number of values the JSON text BODY holds (more when strings hold commas or brackets)."""
    return body.count(b",") + body.count(b"{") + body.count(b"[")


def parse_object(body: bytes) -> dict[str, Any] | None:
    """The body's JSON object; None for anything else. pydantic's parser bounds the nesting (a deep payload
    is refused, not a RecursionError) and refuses NaN, Infinity and lone surrogates, which no store takes."""
    try:
        parsed = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether HEADER is `sha256=` + the HMAC-SHA256 of BODY under SECRET, compared in constant time."""
    if not header:
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode("latin-1", "replace"))


@dataclass
class Intake:
    """The intake's logic, apart from HTTP: `verify` (no I/O) then `store` (one transaction for a group of
    deliveries). `prtriage replay` feeds saved deliveries through `receive`, which does both."""

    secret: bytes = field(repr=False)
    writing: Callable[[], AbstractContextManager[Session]]  # a write transaction (Services.writing)
    enqueue: Callable[[str], None]  # queue the delivery's job; raises when the queue cannot
    router: Router
    metrics: ServiceMetrics
    large_bodies: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(LARGE_BODIES),
                                            repr=False)

    def receive(self, headers: Mapping[str, str], body: bytes) -> Answer:
        verified = self.verify(headers, body)
        return verified if isinstance(verified, Answer) else self.store([verified])[0]

    def verify(self, headers: Mapping[str, str], body: bytes) -> Answer | Verified:
        """Signature, headers, JSON and the handler's decision. HEADERS: case-insensitive (Starlette's) or
        lower-case names."""
        if not signature_matches(self.secret, body, headers.get(SIGNATURE_HEADER)):
            return self.unsigned()
        event, guid = headers.get("x-github-event"), headers.get("x-github-delivery")
        if not event or not guid or len(guid) > GUID_CHARS:
            return self._answer("unverified", "bad_request", 400,
                                "X-GitHub-Event and X-GitHub-Delivery (at most 64 characters) are required")
        event = event[:64]
        if json_values_bound(body) > MAX_JSON_VALUES:
            return self._answer(event, "bad_request", 400,
                                f"the body holds more than {MAX_JSON_VALUES:,} JSON values: no delivery does")
        payload = parse_object(body)
        if payload is None:
            return self._answer(event, "bad_request", 400, "the body is not a JSON object")
        try:
            envelope = validate(Envelope, payload)
            decision = self.router.decide(event, payload)
        except PayloadError as exc:
            return self._answer(event, "bad_request", 400, str(exc))
        return Verified(event, guid, envelope.action, envelope.installation_id, decision)

    def busy(self) -> Answer:
        """Large deliveries wait their turn at most BODY_SECONDS; GitHub then sees a failure to redeliver."""
        return self._answer("unverified", "unavailable", 503,
                            f"too many large deliveries at once; {REDELIVER}")

    def unsigned(self) -> Answer:
        return self._answer("unverified", "unauthorized", 401, "missing or wrong X-Hub-Signature-256")

    def store(self, deliveries: Sequence[Verified]) -> list[Answer]:
        """Store the new deliveries and queue their jobs in one transaction; an answer for each.

        If the queue (or the database) is down, the transaction rolls back: every delivery of the group is
        answered 503 and none is left stored (GitHub redelivers). If the database refuses a row, the group
        is stored again one delivery at a time, so that only the one it refuses is answered 400.
        """
        first: dict[str, Verified] = {}
        for delivery in deliveries:
            first.setdefault(delivery.guid, delivery)
        try:
            stored = self._commit(list(first.values()))
        except Exception as exc:
            return self._failed(deliveries, exc)
        # of several deliveries with one GUID in the group, the first is the new one
        return [self._stored_answer(delivery, new=first[delivery.guid] is delivery
                                    and delivery.guid in stored) for delivery in deliveries]

    def _commit(self, deliveries: list[Verified]) -> set[str]:
        with self.writing() as session:
            stored = record_new_deliveries(session, [delivery.row() for delivery in deliveries])
            for delivery in deliveries:
                if delivery.guid in stored and isinstance(delivery.decision, Job):
                    try:  # inside the transaction: if the queue refuses, nothing is kept
                        self.enqueue(delivery.guid)
                    except Exception as exc:
                        raise QueueDown from exc
        return stored

    def _failed(self, deliveries: Sequence[Verified], exc: Exception) -> list[Answer]:
        if unavailable(exc):
            log.error("%d deliveries not queued: %s", len(deliveries), type(exc.__cause__ or exc).__name__)
            return [self._answer(delivery.event, "unavailable", 503, REDELIVER) for delivery in deliveries]
        if len(deliveries) > 1:  # which one does the database refuse? each alone
            return [answer for delivery in deliveries for answer in self.store([delivery])]
        log.warning("the database refused a delivery: %s", type(exc).__name__)
        return [self._answer(delivery.event, "bad_request", 400, "the database refused this delivery")
                for delivery in deliveries]

    def _stored_answer(self, delivery: Verified, *, new: bool) -> Answer:
        if not new:
            return self._answer(delivery.event, "duplicate", 200, "already received", guid=delivery.guid)
        if isinstance(delivery.decision, Ignored):
            return self._answer(delivery.event, "ignored", 200, delivery.decision.reason, guid=delivery.guid)
        return self._answer(delivery.event, "queued", 202, delivery.decision.kind, guid=delivery.guid)

    def _answer(self, event: str, result: str, status: int, message: str, *, guid: str | None = None,
                ) -> Answer:
        self.metrics.deliveries.inc(event=event, result=result)
        body: dict[str, Any] = {"result": result, "message": message}
        if guid is not None:
            body["delivery"] = guid
        return Answer(status, body)


# async: FastAPI would run a plain function in its thread pool, a hand-over per request for nothing
async def get_intake(request: Request) -> Intake:
    intake: Intake = request.app.state.intake
    return intake


async def get_writer(request: Request) -> GroupCommit:
    writer: GroupCommit = request.app.state.intake_writer
    return writer


IntakeDep = Annotated[Intake, Depends(get_intake)]
WriterDep = Annotated[GroupCommit, Depends(get_writer)]
router = APIRouter()


class TooLarge(Exception):
    """The body passed MAX_BODY_BYTES."""


def too_slow() -> JSONResponse:
    return JSONResponse({"result": "too_slow", "message": f"the body took over {BODY_SECONDS:.0f} s"},
                        status_code=408, headers={"Connection": "close"})


def too_large() -> JSONResponse:
    return JSONResponse({"result": "too_large", "message": "payloads are at most 25 MB"}, status_code=413,
                        headers={"Connection": "close"})  # the rest of the body is not worth reading


async def read_capped(request: Request, cap: int = MAX_BODY_BYTES) -> bytes:
    """The body, read chunk by chunk whatever its transfer encoding; TooLarge as soon as it passes CAP, so
    at most CAP bytes are ever held and the rest is never read. Not copied once read: 25 MB each."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isascii() or not declared.isdigit() or int(declared) > cap):
        raise TooLarge
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > cap:
            raise TooLarge
        body += chunk
    return body  # type: ignore[return-value]  # bytearray: what hmac and the JSON parser read alike


@router.post("/webhooks/github", status_code=202)
async def github_webhook(request: Request, intake: IntakeDep, writer: WriterDep) -> JSONResponse:
    if not request.headers.get(SIGNATURE_HEADER):  # refused before a byte of the body is read
        return _json(intake.unsigned())
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) <= PARSE_IN_LOOP_BYTES:
        return await _take(request, intake, writer, large=False)
    try:  # ten hostile 24 MB bodies must not hold ten bodies and ten parses at once
        async with asyncio.timeout(BODY_SECONDS):
            await intake.large_bodies.acquire()
    except TimeoutError:
        intake.metrics.deliveries.inc(event="unverified", result="busy")
        return _json(intake.busy())
    try:
        return await _take(request, intake, writer, large=True)
    finally:
        intake.large_bodies.release()


async def _take(request: Request, intake: Intake, writer: GroupCommit, *, large: bool) -> JSONResponse:
    try:
        async with asyncio.timeout(BODY_SECONDS):
            body = await read_capped(request)
    except TooLarge:
        intake.metrics.deliveries.inc(event="unverified", result="too_large")
        return too_large()
    except TimeoutError:
        intake.metrics.deliveries.inc(event="unverified", result="too_slow")
        return too_slow()
    if large:  # the HMAC and the parse in a thread: the event loop goes on answering the others
        verified = await run_in_threadpool(intake.verify, request.headers, body)
    else:  # an HMAC and a JSON parse of a usual payload: well under 1 ms
        verified = intake.verify(request.headers, body)
    del body
    return _json(verified if isinstance(verified, Answer) else await writer.submit(verified))


def _json(answer: Answer) -> JSONResponse:
    return JSONResponse(answer.body, status_code=answer.status)
