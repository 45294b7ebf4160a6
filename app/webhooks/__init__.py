"""Webhook intake (intake.py) and one module per event concern, each registering handlers on its Router."""

from app.webhooks import check_events, comment_events, installations, ping, pull_requests, pushes
from app.webhooks.router import Router

ROUTER = Router(ping.router, pull_requests.router, check_events.router, installations.router,
                comment_events.router, pushes.router)

__all__ = ["ROUTER"]
