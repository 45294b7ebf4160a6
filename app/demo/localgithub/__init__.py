"""A fake GitHub served over real HTTP on loopback, for tests of the GitHub room (and of anything that
talks to GitHub through it): REST answers in the shapes of the shared description, state set by tests,
injected faults and rate limits, and a log of every request.

Fixtures (import them in a conftest): `github_app_key`, `fake_github`, `fake_github_factory`; see plugin.py.
"""

from app.demo.localgithub.keys import AppKey, make_app_key
from app.demo.localgithub.server import FakeGitHub
from app.demo.localgithub.state import RecordedRequest
from app.demo.localgithub.tarballs import build_tarball, entry, raw_tarball

__all__ = ["AppKey", "FakeGitHub", "RecordedRequest", "build_tarball", "entry", "make_app_key", "raw_tarball"]
