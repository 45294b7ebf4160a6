"""`ping`: GitHub's test delivery when a webhook is set up; answered 200 and recorded, nothing queued."""

from __future__ import annotations

from app.webhooks.router import Decision, Ignored, Payload, Router

router = Router()


@router.register("ping")
def pong(payload: Payload) -> Decision:
    return Ignored("ping")
