"""Webhook intake (intake.py) and one module per event concern, each registering handlers on its Router."""

from app.webhooks import checks, installations, ping, pull_requests
from app.webhooks.router import Router

ROUTER = Router(ping.router, pull_requests.router, checks.router, installations.router)

__all__ = ["ROUTER"]
