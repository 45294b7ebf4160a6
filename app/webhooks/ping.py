"""`ping`: GitHub's test delivery when a webhook is set up; answered 200 and recorded, nothing queued."""

from __future__ import annotations

from app.webhooks.payloads import Envelope
from app.webhooks.router import Decision, Ignored, Router

router = Router()


@router.register("ping", model=Envelope)
def pong(event: Envelope) -> Decision:
    return Ignored("ping")
