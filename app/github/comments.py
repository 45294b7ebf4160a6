"""The one sticky comment per pull request: found by a hidden marker AND the App's own login, edited in
place, never re-sent unchanged, kept under GitHub's size limit, and never posted twice: a creation that
failed in a way GitHub may have applied is followed by a look for it, not by a second POST."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Literal

from app.github.client import GitHubClient
from app.github.github_models import CommentInfo

log = logging.getLogger(__name__)

STICKY_MARKER = "<!-- prtriage:sticky -->"
# GitHub refuses a comment body above 65,536 characters.
COMMENT_LIMIT = 65_536

Upserted = Literal["created", "updated", "unchanged"]


def fit_comment(body: str, *, limit: int = COMMENT_LIMIT) -> str:
    """BODY, cut to fewer than LIMIT characters when it is longer, saying how much was cut.

    The report folds long lists itself; this is the last guard. The cut falls on a line break, and a code
    fence or <details> block left open by the cut is closed so that the rest still renders.
    """
    if len(body) < limit:
        return body
    room = limit - 100  # first guess at the room the notice and the closing tags leave
    while room > 0:
        cut = body.rfind("\n", 0, room)
        kept = body[: cut if cut > room // 2 else room]
        closing = "\n```" if kept.count("```") % 2 else ""
        closing += "\n</details>" * max(kept.count("<details") - kept.count("</details>"), 0)
        fitted = f"{kept}{closing}\n\n*… cut here: {len(body) - len(kept):,} more characters did not fit.*"
        if len(fitted) < limit:
            return fitted
        room -= len(fitted) - limit + 1
    return body[: limit - 1]


def sticky_body(body: str, *, marker: str = STICKY_MARKER) -> str:
    """The text actually posted: BODY fitted, then the marker on the last line (the first line is the
    verdict a reader sees, and in e-mail notifications)."""
    if marker in body:
        body = body.replace(marker, "").strip()
    return fit_comment(body, limit=COMMENT_LIMIT - len(marker) - 2) + "\n\n" + marker


def find_sticky_comment(comments: Iterable[CommentInfo], *, marker: str, app_login: str,
                        ) -> CommentInfo | None:
    """The App's own marked comment: anyone can paste the marker, only the App posts as APP_LOGIN."""
    ours = [comment for comment in comments if marker in comment.body and comment.author == app_login]
    if len(ours) > 1:
        log.warning("%d sticky comments found; editing the oldest (id %d)", len(ours), ours[0].id)
    return ours[0] if ours else None


def upsert_sticky_comment(client: GitHubClient, owner: str, repo: str, number: int, body: str, *,
                          marker: str = STICKY_MARKER, app_login: str) -> tuple[Upserted, int]:
    """Create the sticky comment, or edit it in place; nothing is sent when its text would not change.

    GitHub sometimes answers 502 (or drops the connection) after it created the comment: the POST is
    then not repeated blindly, the comments are read again and ours, if it is there, is the one created.
    """
    text = sticky_body(body, marker=marker)

    def look() -> CommentInfo | None:
        return find_sticky_comment(client.list_issue_comments(owner, repo, number), marker=marker,
                                   app_login=app_login)

    existing = look()
    if existing is None:
        def send() -> CommentInfo:
            return client.create_issue_comment(owner, repo, number, text, send_once=True)

        created = client.policy.create("issues/create-comment", send, look)
        if created.body != text:  # found after a lost answer, yet not what this call sent
            client.update_issue_comment(owner, repo, created.id, text)
        return "created", created.id
    if existing.body == text:
        return "unchanged", existing.id
    client.update_issue_comment(owner, repo, existing.id, text)
    return "updated", existing.id


def reply_marker(comment_id: int) -> str:
    return f"<!-- prtriage:reply-to:{comment_id} -->"


def post_reply(client: GitHubClient, owner: str, repo: str, number: int, text: str, *, in_reply_to: int,
               app_login: str) -> tuple[Upserted, int]:
    """A reply to the comment IN_REPLY_TO, posted once. It carries a hidden marker naming that comment, so
    that a command job carried out again (a retry, a redelivery) or a POST GitHub applied before failing
    finds the reply already there (by the marker and our login) instead of posting it twice."""
    marker = reply_marker(in_reply_to)
    body = fit_comment(text, limit=COMMENT_LIMIT - len(marker) - 2) + "\n\n" + marker

    def look() -> CommentInfo | None:
        return find_sticky_comment(client.list_issue_comments(owner, repo, number), marker=marker,
                                   app_login=app_login)

    existing = look()
    if existing is not None:
        return "unchanged", existing.id

    def send() -> CommentInfo:
        return client.create_issue_comment(owner, repo, number, body, send_once=True)

    return "created", client.policy.create("issues/create-comment", send, look).id
