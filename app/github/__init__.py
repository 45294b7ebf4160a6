"""The GitHub room: the only code that imports PyGithub or speaks HTTP to GitHub; plain data in and out.

    app = GitHubApp.from_settings(settings)            # JWT, installation tokens, retry policy (auth.py)
    client = GitHubClient(app, installation_id)        # questions about PRs, issues, files (client.py)
    download_tree(client, owner, repo, sha, cache)     # a commit's source tree, checked (sources.py)
    upsert_sticky_comment(client, ..., app_login=...)  # the one PR comment (comments.py)
    create_check_run / note_check_run / complete_check_run / cancel_check_run   (checks.py)
"""

from app.github.app_auth import GitHubApp
from app.github.checks import (
    Annotation,
    Button,
    CheckAction,
    cancel_check_run,
    complete_check_run,
    create_check_run,
    note_check_run,
)
from app.github.client import GitHubClient
from app.github.comments import STICKY_MARKER, post_reply, reply_marker, upsert_sticky_comment
from app.github.errors import GitHubError, NotFound, RateLimited, TarballRefused, Unconfirmed
from app.github.github_models import CheckRunInfo, CommentInfo, CommitInfo, IssueInfo, PullInfo, RateLimit
from app.github.metrics import METRICS, GitHubMetrics
from app.github.retry import RetryPolicy
from app.github.sources import TreeLimits, download_tree

__all__ = [
    "METRICS", "STICKY_MARKER", "Annotation", "Button", "CheckAction", "CheckRunInfo", "CommentInfo",
    "CommitInfo", "GitHubApp", "GitHubClient", "GitHubError", "GitHubMetrics", "IssueInfo", "NotFound",
    "PullInfo",
    "RateLimit", "RateLimited", "RetryPolicy", "TarballRefused", "TreeLimits", "Unconfirmed",
    "cancel_check_run", "complete_check_run", "create_check_run", "download_tree", "note_check_run",
    "post_reply",
    "reply_marker", "upsert_sticky_comment",
]
