"""What the GitHub adapter raises: plain exceptions that carry no secret and no PyGithub object."""

from __future__ import annotations


class GitHubError(Exception):
    """GitHub answered with an error, or not at all, after every retry the policy allows.

    `status` is None when no answer came (connection refused, reset, timed out).
    """

    def __init__(self, operation: str, status: int | None, message: str) -> None:
        self.operation = operation
        self.status = status
        self.message = message
        answer = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{operation}: {answer}: {message}" if message else f"{operation}: {answer}")


class NotFound(GitHubError):
    """404 or 410: the object does not exist, or the installation may not see it."""


class Unconfirmed(GitHubError):
    """A write that must not be sent twice failed in a way GitHub may still have applied: a 5xx (GitHub
    sometimes answers 502 after committing) or a connection lost once the request was on its way. The
    caller looks for what the write would have made before writing again."""


class RateLimited(GitHubError):
    """A rate limit whose reset is further away than the policy agrees to wait."""

    def __init__(self, operation: str, status: int | None, message: str, *, wait_seconds: float) -> None:
        super().__init__(operation, status, f"{message} (would have to wait {wait_seconds:.0f} s)")
        self.wait_seconds = wait_seconds


class TarballRefused(Exception):
    """A source archive that will not be unpacked; the message says which entry and why."""


def error_for(operation: str, status: int | None, message: str) -> GitHubError:
    if status in (404, 410):
        return NotFound(operation, status, message)
    return GitHubError(operation, status, message)
