"""Webhook intake (intake.py) and one module per event concern, each registering handlers on its Router."""

from app.webhooks import checks, comments, installations, ping, pull_requests
from app.webhooks.router import Router

ROUTER = Router(ping.router, pull_requests.router, checks.router, installations.router, comments.router)

__all__ = ["ROUTER"]
