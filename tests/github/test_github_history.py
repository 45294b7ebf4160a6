"""The App's history of layouts (app/github/history.py) through the fake GitHub over real HTTP: a revision's
files from the Git Trees API, the newest revision from the default branch, the renames from the compare API,
whose list of changed files GitHub cuts at 300 (a range that long is split, and the halves composed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from app.demo.localgithub import FakeGitHub
from app.github import GitHubClient
from app.github.history import GitHubHistory

REPO = "octo/widgets"


def commit(fake: FakeGitHub, root: Path, name: str, files: dict[str, str]) -> str:
    """A commit of FILES on the default branch (its head from now on), listed by the Git Trees API."""
    sha = hashlib.sha1(name.encode()).hexdigest()
    directory = root / name
    for path, text in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text(text)
    fake.set_tree(REPO, sha, directory)
    fake.push(REPO, sha, name)
    return sha


def data(prefix: str, count: int) -> dict[str, str]:
    return {f"data/{prefix}{number:03}.txt": f"{prefix} {number}\n" for number in range(count)}


def test_a_file_moved_twice_is_followed_through_ranges_longer_than_the_listing(
        fake: FakeGitHub, client: GitHubClient, tmp_path: Path) -> None:
    script = "import subprocess\nsubprocess.run(['python', 'train.py'])\n"
    older = commit(fake, tmp_path, "older", {"ci/test_a.py": script, "README.md": "widgets\n"})
    middle = commit(fake, tmp_path, "middle", {"tests/ci/test_a.py": script, "README.md": "widgets\n",
                                               **data("a", 200)})
    newest = commit(fake, tmp_path, "newest", {"tests/e2e/test_a.py": script, "README.md": "widgets\n",
                                               **data("a", 200), **data("b", 200)})
    history = GitHubHistory(client, *REPO.split("/"))

    assert history.newest() == newest
    assert sorted(history.paths_at(older)) == ["README.md", "ci/test_a.py"]
    assert history.earlier_paths(older, newest) == {"tests/e2e/test_a.py": {"ci/test_a.py"}}
    # the whole range lists 401 changed files, cut at 300 before the rename: split at its middle commit
    compared = [call.route.rsplit("/", 1)[1] for call in fake.calls("GET", rf"/repos/{REPO}/compare/.*")]
    assert compared == [f"{older}...{newest}", f"{older}...{middle}", f"{middle}...{newest}"]
    assert history.earlier_paths(middle, newest) == {"tests/e2e/test_a.py": {"tests/ci/test_a.py"}}


def test_what_github_does_not_answer_reads_as_no_history(fake: FakeGitHub, client: GitHubClient) -> None:
    history = GitHubHistory(client, *REPO.split("/"))
    unknown = hashlib.sha1(b"never pushed").hexdigest()
    assert history.newest() is None  # no commit on the default branch
    assert list(history.paths_at(unknown)) == []
