"""POST /webhooks/github: the signature checked on the raw bytes before anything parses them, the delivery
stored once by its GUID, its job queued inside the same transaction, and an answer within milliseconds.

401 bad or missing signature (nothing stored) · 400 missing event or delivery header, malformed JSON, a
payload without what its event must carry · 200 redelivery or concurrent duplicate (nothing queued), and
deliveries ignored by design (ping, events and actions without a handler; stored as `ignored`) · 202 job
queued · 503 the queue (or the database) cannot take it: the row is rolled back, GitHub shows the failure
and the delivery can be redelivered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.metrics import ServiceMetrics
from app.store.types import utcnow
from app.webhooks.batching import GroupCommit, record_new_deliveries
from app.webhooks.router import Ignored, Job, PayloadError, Router, installation_id

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
PARSE_IN_LOOP_BYTES = 256 * 1024  # a larger body is parsed off the event loop
GUID_CHARS = 64  # the deliveries.guid column


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

    def receive(self, headers: Mapping[str, str], body: bytes) -> Answer:
        verified = self.verify(headers, body)
        return verified if isinstance(verified, Answer) else self.store([verified])[0]

    def verify(self, headers: Mapping[str, str], body: bytes) -> Answer | Verified:
        """Signature, headers, JSON and the handler's decision. HEADERS: case-insensitive (Starlette's) or
        lower-case names."""
        if not signature_matches(self.secret, body, headers.get("x-hub-signature-256")):
            return self._answer("unverified", "unauthorized", 401, "missing or wrong X-Hub-Signature-256")
        event, guid = headers.get("x-github-event"), headers.get("x-github-delivery")
        if not event or not guid or len(guid) > GUID_CHARS:
            return self._answer("unverified", "bad_request", 400,
                                "X-GitHub-Event and X-GitHub-Delivery (at most 64 characters) are required")
        event = event[:64]
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return self._answer(event, "bad_request", 400, "the body is not a JSON object")
        try:
            decision = self.router.decide(event, payload)
        except (PayloadError, KeyError, TypeError, ValueError) as exc:
            reason = str(exc) if isinstance(exc, PayloadError) else "payload of an unexpected shape"
            return self._answer(event, "bad_request", 400, reason)
        action = payload.get("action") if isinstance(payload.get("action"), str) else None
        return Verified(event, guid, action, installation_id(payload), decision)

    def store(self, deliveries: Sequence[Verified]) -> list[Answer]:
        """Store the new deliveries and queue their jobs in one transaction; an answer for each.

        If the queue (or the database) fails, the transaction rolls back: every delivery of the group is
        answered 503 and none is left stored (GitHub redelivers).
        """
        first: dict[str, Verified] = {}
        for delivery in deliveries:
            first.setdefault(delivery.guid, delivery)
        try:
            with self.writing() as session:
                stored = record_new_deliveries(session, [delivery.row() for delivery in first.values()])
                for guid in stored:
                    if isinstance(first[guid].decision, Job):
                        self.enqueue(guid)  # inside the transaction: if the queue refuses, nothing is kept
        except Exception as exc:
            log.error("%d deliveries not queued: %s", len(first), type(exc).__name__)
            return [self._answer(delivery.event, "unavailable", 503,
                                 "the delivery could not be queued; redeliver it") for delivery in deliveries]
        # of several deliveries with one GUID in the group, the first is the new one
        return [self._stored_answer(delivery, new=first[delivery.guid] is delivery
                                    and delivery.guid in stored) for delivery in deliveries]

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


@router.post("/webhooks/github", status_code=202)
async def github_webhook(request: Request, intake: IntakeDep, writer: WriterDep) -> JSONResponse:
    declared = request.headers.get("content-length") or "0"
    if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
        return JSONResponse({"result": "too_large", "message": "payloads are at most 25 MB"}, status_code=413)
    body = await request.body()
    if len(body) <= PARSE_IN_LOOP_BYTES:  # an HMAC and a JSON parse of a usual payload: well under 1 ms
        verified = intake.verify(request.headers, body)
    else:
        verified = await run_in_threadpool(intake.verify, request.headers, body)
    answer = verified if isinstance(verified, Answer) else await writer.submit(verified)
    return JSONResponse(answer.body, status_code=answer.status)
