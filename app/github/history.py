"""A repository's layouts as the GitHub API tells them, for the App, which has no clone: a revision's files
(Git Trees API), the revision a policy's globs describe (the default branch's head), and the files renamed or
copied between two revisions (compare API). The engine follows a policy through it as it follows one
through git for the command line (`History` in app/engine/layout_drift.py).
"""

from __future__ import annotations

import logging

from app.github.client import GitHubClient
from app.github.errors import GitHubError
from app.trees.renames import follow

log = logging.getLogger(__name__)

# compare calls for one range: GitHub lists at most 300 changed files of a comparison, so a range whose list
# was cut is split at a commit in its middle and each half compared (a year of a busy repository changes
# thousands of files); past this many calls the renames found so far are what there is
MAX_COMPARISONS = 16


class GitHubHistory:
    """The history of OWNER/REPO, read through CLIENT; a call GitHub does not answer reads as unknown (no
    paths, no newest revision, no renames): the policy is then used as written, as for trees without
    history."""

    def __init__(self, client: GitHubClient, owner: str, repo: str) -> None:
        self.client, self.owner, self.repo = client, owner, repo
        self.comparisons = 0

    def paths_at(self, sha: str) -> list[str]:
        try:
            tree = self.client.commit_tree(self.owner, self.repo, sha)
        except GitHubError as exc:
            log.warning("%s/%s: the files of %s not listed: %s", self.owner, self.repo, sha[:12], exc)
            return []
        if tree.truncated:  # a partial listing would read as files missing: nothing is followed
            log.info("%s/%s: the tree of %s is too large to list whole", self.owner, self.repo, sha[:12])
            return []
        return list(tree.blobs)

    def newest(self) -> str | None:
        try:
            return self.client.branch_head(self.owner, self.repo,
                                           self.client.default_branch(self.owner, self.repo))
        except GitHubError as exc:
            log.warning("%s/%s: no default branch head: %s", self.owner, self.repo, exc)
            return None

    def earlier_paths(self, older: str, newer: str) -> dict[str, set[str]]:
        """Path at NEWER -> its paths at OLDER: the renames and copies of each compared range, composed
        oldest range first (a file moved twice is followed through both moves)."""
        self.comparisons = 0
        moves = self._moves(older, newer)
        found: dict[str, set[str]] = {}
        for new, old in follow(["R", old, new] for old, new in moves).items():
            found.setdefault(new, set()).add(old)
        return found

    def _moves(self, older: str, newer: str) -> list[tuple[str, str]]:
        """(old path, new path) of the files renamed or copied from OLDER to NEWER, oldest range first."""
        self.comparisons += 1
        try:
            comparison = self.client.comparison(self.owner, self.repo, older, newer)
        except (GitHubError, ValueError) as exc:
            log.warning("%s/%s: %s...%s not compared: %s", self.owner, self.repo, older[:12], newer[:12], exc)
            return []
        if not comparison.cut or len(comparison.commits) < 2 or self.comparisons + 2 > MAX_COMPARISONS:
            return comparison.moved
        middle = comparison.commits[len(comparison.commits) // 2 - 1]
        return self._moves(older, middle) + self._moves(middle, newer)
