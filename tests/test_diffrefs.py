"""References in the lines a pull request adds (app/analysis/followups/diffrefs.py), through the finder and
the classifier of the PR's texts: real `git diff` output of a real repository, and GitHub-style patches."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.analysis.followups import diffrefs
from app.analysis.followups.diffrefs import added_lines, diff_texts, patch_lines
from app.analysis.followups.followups import TextReference, find_references
from app.analysis.followups.references import MAX_MENTIONS, Text


def references(diff: str) -> list[TextReference]:
    return find_references(diff_texts(added_lines(diff)), owner="acme", repo="widgets", number=7)


def found(diff: str) -> list[tuple[str, str, str | None, int | None]]:
    return [(r.kind, r.target, r.path, r.line) for r in references(diff)]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "dev@example.com")
    git(tmp_path, "config", "user.name", "dev")
    return tmp_path


def commit(repo: Path, files: dict[str, str | bytes]) -> str:
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change")
    return git(repo, "rev-parse", "HEAD").strip()


def diff_of(repo: Path, files_before: dict[str, str | bytes], files_after: dict[str, str | bytes]) -> str:
    base = commit(repo, files_before)
    head = commit(repo, files_after)
    return git(repo, "diff", "--no-ext-diff", "--no-textconv", base, head)


TRAIN = "def train(args):\n    return args\n\n\ndef evaluate(args):\n    return args\n"


def test_a_todo_comment_a_skip_reason_and_a_docs_page_each_with_path_and_line(repo: Path) -> None:
    before: dict[str, str | bytes] = {"train.py": TRAIN, "docs/usage.md": "# Usage\n\nRun it.\n",
                                      "tests/test_x.py": ""}
    diff = diff_of(repo, before, {
        "train.py": TRAIN.replace("    return args\n\n\ndef evaluate",
                                  "    # TODO(#12): the scheduler ignores --lr-warmup for now.\n"
                                  "    return args\n\n\ndef evaluate"),
        "tests/test_x.py": "import pytest\n\n\n"
                           "@pytest.mark.skip(reason=\"flaky on CPU; will be fixed in #13\")\n"
                           "def test_x():\n    pass\n",
        "docs/usage.md": "# Usage\n\nRun it.\n\nThe `--fast` flag stays slow until #14 merges.\n"})
    assert found(diff) == [
        ("prerequisite", "acme/widgets#14", "docs/usage.md", 5),  # in git's order of files
        ("followup", "acme/widgets#13", "tests/test_x.py", 4),
        ("followup", "acme/widgets#12", "train.py", 2),
    ]
    [todo] = [r for r in references(diff) if r.number == 12]
    assert todo.source == "diff" and todo.sentence == "TODO(#12): the scheduler ignores --lr-warmup for now."
    assert todo.where == "train.py:2"


def test_a_reference_on_a_removed_line_opens_nothing_and_closes_nothing(repo: Path) -> None:
    with_todo = TRAIN.replace("    return args\n\n\ndef evaluate",
                              "    # TODO(#12): the scheduler ignores --lr-warmup for now.\n"
                              "    return args\n\n\ndef evaluate")
    diff = diff_of(repo, {"train.py": with_todo, "docs/usage.md": "Fixed once #20 lands: see #21.\n"},
                   {"train.py": TRAIN, "docs/usage.md": "Works.\n"})
    assert "-    # TODO(#12)" in diff and "-Fixed once #20" in diff
    assert references(diff) == []


def test_a_moved_line_counts_at_its_new_place_only(repo: Path) -> None:
    todo = "# TODO(#12): drop this shim.\n"
    diff = diff_of(repo, {"a.py": f"x = 1\n{todo}", "b.py": "y = 2\n"},
                   {"a.py": "x = 1\n", "b.py": f"y = 2\n\n{todo}"})
    assert found(diff) == [("followup", "acme/widgets#12", "b.py", 3)]


def test_only_prose_counts_in_code(repo: Path) -> None:
    code = ("items = data['#12']  # see #15\n"
            "value = compute(x)  # TODO: the fix lands in #16\n"
            "colour = '#123'\n"
            'def f():\n    """Wait for #17 to merge first."""\n    return "#18"\n')
    diff = diff_of(repo, {"m.py": ""}, {"m.py": code})
    kinds = {r.number: r.kind for r in references(diff)}
    # strings are read as prose too (`'#12'`, `"#18"` are mentions); code itself never is
    assert kinds == {12: "mention", 15: "mention", 16: "followup", 123: "mention", 17: "prerequisite",
                     18: "mention"}


def test_c_style_and_dash_comments(repo: Path) -> None:
    diff = diff_of(repo, {"k.cu": "", "q.sql": ""}, {
        "k.cu": "int a = 1; // TODO(#30): vectorise\n/*\n * Blocked by #31 upstream.\n */\nint b = 2;\n",
        "q.sql": "SELECT 1; -- follow-up in #32\n"})
    assert found(diff) == [("followup", "acme/widgets#30", "k.cu", 1),
                           ("prerequisite", "acme/widgets#31", "k.cu", 3),
                           ("followup", "acme/widgets#32", "q.sql", 1)]


def test_a_closing_keyword_or_a_revert_in_a_file_is_a_mention(repo: Path) -> None:
    diff = diff_of(repo, {"m.py": ""}, {"m.py": "# Fixes #40: the off-by-one in the sampler.\nx = 1\n"
                                                "# This reverts #41 for CPUs only.\n"})
    assert found(diff) == [("mention", "acme/widgets#40", "m.py", 1),
                           ("mention", "acme/widgets#41", "m.py", 3)]
    texts = [Text("body", "Fixes #40. This reverts #41.")]
    assert [r.kind for r in find_references(texts, owner="acme", repo="widgets", number=7)] == \
        ["closes", "revert"]  # in the PR's own text, both keep their meaning


def test_the_diff_has_a_budget_of_its_own(repo: Path) -> None:
    texts = [Text("body", " ".join(f"see #{n}." for n in range(1, MAX_MENTIONS + 50)))]
    diff = diff_of(repo, {"m.py": ""}, {"m.py": "# TODO(#9000): later\n"})
    refs = find_references([*texts, *diff_texts(added_lines(diff))], owner="acme", repo="widgets", number=7)
    assert len(refs) == MAX_MENTIONS + 1 and refs[-1].kind == "followup" and refs[-1].where == "m.py:1"


def test_code_fences_in_docs_are_not_prose(repo: Path) -> None:
    page = "Intro.\n\n```bash\n# TODO(#50) inside a shell example\n```\n\nDepends on #51.\n"
    diff = diff_of(repo, {"README.md": ""}, {"README.md": page})
    assert found(diff) == [("prerequisite", "acme/widgets#51", "README.md", 7)]


def test_markdown_links_read_as_on_the_page(repo: Path) -> None:
    page = "Multi-node work is\ntracked in [PR #60](https://github.com/acme/widgets/pull/60).\n"
    diff = diff_of(repo, {"docs/a.md": ""}, {"docs/a.md": page})
    assert found(diff) == [("followup", "acme/widgets#60", "docs/a.md", 2)]


def test_binary_vendored_generated_unknown_and_long_lines_are_skipped(repo: Path) -> None:
    todo = "# TODO(#70): remove\n"
    diff = diff_of(repo, {"keep.py": ""}, {
        "blob.bin": b"\x00\x01TODO(#71)\x00" * 10,
        "vendor/lib/x.py": todo, "third_party/y.py": todo, "api_pb2.py": todo,
        "data.csv": "TODO(#72),x\n", "long.py": "# " + "x" * diffrefs.MAX_LINE_CHARS + " TODO(#73)\n",
        "keep.py": todo})
    assert "Binary files" in diff
    assert found(diff) == [("followup", "acme/widgets#70", "keep.py", 1)]


def test_a_quoted_path_is_read_back(repo: Path) -> None:
    diff = diff_of(repo, {"a.py": ""}, {"doc é.md": "Blocked by #80.\n"})
    assert '"b/doc \\303\\251.md"' in diff
    assert found(diff) == [("prerequisite", "acme/widgets#80", "doc é.md", 1)]


def test_the_number_of_added_lines_read_is_bounded(monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    monkeypatch.setattr(diffrefs, "MAX_ADDED_LINES", 3)
    diff = diff_of(repo, {"a.py": ""}, {"a.py": "# see #1\n# see #2\n# see #3\n# TODO(#4): later\n"})
    assert [r.number for r in references(diff)] == [1, 2, 3]


def test_github_patches_give_the_new_line_numbers() -> None:
    patch = ("@@ -10,4 +10,5 @@ def train(args):\n     x = 1\n-    # TODO(#90): old promise\n"
             "+    # TODO(#91): new promise\n+    # until #92 merges, this is slow\n     y = 2\n \n"
             "\\ No newline at end of file")
    texts = diff_texts(patch_lines("miles/train.py", patch))
    assert [(t.path, t.line, t.text) for t in texts] == [
        ("miles/train.py", 11, "TODO(#91): new promise"),
        ("miles/train.py", 12, "until #92 merges, this is slow")]
    refs = find_references(texts, owner="acme", repo="widgets", number=7)
    assert [(r.kind, r.number) for r in refs] == [("followup", 91), ("prerequisite", 92)]


def test_terse_promises_in_added_lines_as_people_write_them() -> None:
    patch = ('@@ -1,2 +1,4 @@\n import pytest\n+@pytest.mark.skip(reason="flaky on CPU; fix in #812")\n'
             '+# until #900 merges, pin the fork\n def test_x(): pass\n')
    found = find_references(diff_texts(patch_lines("tests/test_a.py", patch)), owner="o", repo="r", number=1)
    assert [(r.kind, r.target, r.path, r.line) for r in found] == [
        ("followup", "o/r#812", "tests/test_a.py", 2), ("prerequisite", "o/r#900", "tests/test_a.py", 3)]
