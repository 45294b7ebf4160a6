"""Which policy judged a change, and why: every report names it, the default one says what to do next, an
uncommitted policy is not silently ignored, and `init` prints the command that uses what it wrote."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from twin.miles import make_git_repo

from app.analysis.core.policy import PolicyError, parse_policy
from app.analysis.core.policy_origin import PolicyOrigin, builtin_for
from app.analysis.verdict.render import render
from app.analysis.verdict.report import CheckReport
from app.engine.policy_choice import RepositoryNameError, named_repository
from app.triage.pr_report import check_output, comment_markdown

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "incident"
EXAMPLE_POLICY = EXAMPLE / "policy.yml"
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          timeout=60, env={**os.environ, **GIT}).stdout.strip()


def run(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, with no GITHUB_REPOSITORY unless ENV gives one (a CI runner sets it)."""
    clean = {k: v for k, v in os.environ.items()
             if k != "GITHUB_REPOSITORY" and (not k.startswith("PRTRIAGE_") or k == "PRTRIAGE_ENV_DIR")}
    return subprocess.run([sys.executable, "-m", "app.cli", *args, "--cache-dir", str(cache)], cwd=PROJECT,
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**clean, **(env or {})})


@pytest.fixture(scope="module")
def example_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example as a clone whose `origin` is a local path (no GitHub name): `base` and, checked out, the
    head on `main`."""
    root = tmp_path_factory.mktemp("example")
    source = root / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    subprocess.run(["cp", "-r", f"{EXAMPLE / 'base'}/.", str(source)], check=True)
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "base")
    git(source, "branch", "base")
    subprocess.run(["cp", "-r", f"{EXAMPLE / 'head'}/.", str(source)], check=True)
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "head")
    subprocess.run(["git", "clone", "-q", str(source), str(root / "clone")], check=True, timeout=60)
    return root / "clone"


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    document = json.loads(done.stdout)
    assert isinstance(document, dict)
    return document


# The policy's origin, said in words


@pytest.mark.parametrize(("origin", "said"), [
    (builtin_for("radixark/miles", "origin")[1],
     "policies/radixark/miles.yml (built-in for radixark/miles, from origin)"),
    (builtin_for("radixark/miles", "--repository")[1],
     "policies/radixark/miles.yml (built-in for radixark/miles, from --repository)"),
    (builtin_for(None, None)[1], "default (no policy for this repository)"),
    (builtin_for("someone/else", "origin")[1], "default (no policy for someone/else)"),
    (PolicyOrigin("base", ".github/pr-triage.yml"), ".github/pr-triage.yml at the base"),
    (PolicyOrigin("option", "my.yml"), "my.yml (--policy)"),
])
def test_each_origin_in_one_line(origin: PolicyOrigin, said: str) -> None:
    assert origin.describe() == said


def test_a_builtin_policy_and_the_default_one_by_their_json() -> None:
    assert builtin_for("radixark/miles", "origin")[1].to_json() == {
        "source": "builtin", "path": "policies/radixark/miles.yml", "repository": "radixark/miles"}
    assert builtin_for("a/b", "GITHUB_REPOSITORY")[1].to_json() == {
        "source": "default", "path": "policies/default.yml", "repository": "a/b"}


def test_the_repository_named_by_the_option_then_origin_then_the_environment(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    environ = {"GITHUB_REPOSITORY": "env/name"}
    assert named_repository(None, repo, environ) == ("env/name", "GITHUB_REPOSITORY")  # no origin
    git(repo, "remote", "add", "origin", "/somewhere/local")
    assert named_repository(None, repo, environ) == ("env/name", "GITHUB_REPOSITORY")  # not on GitHub
    assert named_repository(None, repo, {}) == (None, None)
    git(repo, "remote", "set-url", "origin", "git@github.com:radixark/miles.git")
    assert named_repository(None, repo, environ) == ("radixark/miles", "origin")
    assert named_repository("THUDM/slime", repo, environ) == ("THUDM/slime", "--repository")
    with pytest.raises(RepositoryNameError, match="--repository: expected owner/name"):
        named_repository("slime", repo, environ)
    with pytest.raises(RepositoryNameError, match="GITHUB_REPOSITORY: expected owner/name"):
        named_repository(None, None, {"GITHUB_REPOSITORY": "a/b/c"})


# Invalid policies: every problem, typos first


def test_a_misspelt_key_comes_first_with_its_did_you_mean_and_every_problem_is_shown() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy("harness: {limits: {suite_seconds: soon}}\nvalidaton: {}\n"
                     "matrix: {sources: [{kind: static, suites: [], extra: 1}]}\n", "p.yml")
    lines = str(raised.value).splitlines()
    assert lines[0] == "p.yml: 3 problems:"
    assert lines[1] == "  (top level): unknown key `validaton`, did you mean `validation`?"
    assert lines[2].startswith("  matrix.sources[0]: unknown key `extra`")
    assert lines[3] == "  harness.limits.suite_seconds: expected a number"
    assert "more)" not in str(raised.value)


def test_one_problem_stays_on_one_line() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy("validation: {paths: [a.py], entry: 'a:b', unknwon_flags: error}\n"
                     "matrix: {sources: []}\n", "p.yml")
    assert str(raised.value) == ("p.yml: validation: unknown key `unknwon_flags`, did you mean "
                                 "`unknown_flags`?")


# The command line


def test_the_default_policy_is_named_with_the_next_steps(example_clone: Path, tmp_path: Path) -> None:
    done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
               "--format", "json", cache=tmp_path / "cache")
    assert done.returncode == 3, done.stderr
    report = report_of(done)
    assert report["policy"] == {"source": "default", "path": "policies/default.yml", "repository": None}
    assert report["error"]["kind"] == "analysis"
    said = report["error"]["message"]
    assert said in done.stderr
    assert "no GitHub repository was named (`origin` is not on github.com)" in said
    assert f"`prtriage init --repo {example_clone} --rev origin/base`" in said
    assert "`--policy FILE`" in said and "`--repository owner/name` picks a built-in policy (" in said
    assert "radixark/miles" in said


def test_a_repository_without_a_builtin_policy_says_so(example_clone: Path, tmp_path: Path) -> None:
    done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
               "--format", "json", cache=tmp_path / "cache", env={"GITHUB_REPOSITORY": "someone/else"})
    assert done.returncode == 3, done.stderr
    report = report_of(done)
    assert report["policy"] == {"source": "default", "path": "policies/default.yml",
                                "repository": "someone/else"}
    assert "none is built in for someone/else (named by GITHUB_REPOSITORY)" in report["error"]["message"]


def test_the_policy_given_is_named_in_text_and_json(example_clone: Path, tmp_path: Path) -> None:
    done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
               "--policy", str(EXAMPLE_POLICY), cache=tmp_path / "cache")
    assert done.returncode == 1, done.stderr
    assert f"policy: {EXAMPLE_POLICY} (--policy)" in done.stdout.splitlines()
    done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
               "--policy", str(EXAMPLE_POLICY), "--format", "json", cache=tmp_path / "cache")
    report = report_of(done)
    assert report["policy"] == {"source": "option", "path": str(EXAMPLE_POLICY), "repository": None}
    assert "error" not in report


def test_an_uncommitted_policy_is_named_then_the_committed_one_used(example_clone: Path,
                                                                   tmp_path: Path) -> None:
    written = example_clone / ".github" / "pr-triage.yml"
    written.parent.mkdir(exist_ok=True)
    written.write_text(EXAMPLE_POLICY.read_text())
    try:
        done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
                   cache=tmp_path / "cache")
        assert done.returncode == 3
        assert f"warning: {written} is in the work tree but not in the base revision" in done.stderr
        assert f"Commit it, or pass --policy {written}" in done.stderr
        git(example_clone, "checkout", "-q", "-b", "policed", "origin/base")
        git(example_clone, "add", ".github/pr-triage.yml")
        git(example_clone, "commit", "-q", "-m", "policy")
        done = run("check", "--repo", str(example_clone), "--base", "policed", "--head", "main",
                   cache=tmp_path / "cache")
        assert done.returncode == 1, done.stderr
        assert "policy: .github/pr-triage.yml at the base" in done.stdout.splitlines()
        assert "warning" not in done.stderr
    finally:
        git(example_clone, "checkout", "-q", "main")
        written.unlink(missing_ok=True)


def test_init_prints_the_command_that_uses_what_it_wrote(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "miles", ["incident"])
    done = run("init", "--repo", str(repo), "--rev", "main", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    [following] = [line.removeprefix("next: ") for line in done.stdout.splitlines()
                   if line.startswith("next: ")]
    written = (repo / ".github" / "pr-triage.yml").resolve()
    assert following == (f"prtriage check --repo {repo} --base main --head HEAD --policy {written}")
    git(repo, "checkout", "-q", "incident")  # the author's branch: HEAD is the change to judge
    argv = shlex.split(following)
    assert argv[0] == "prtriage"
    done = run(*argv[1:], "--format", "json", cache=tmp_path / "cache")
    report = report_of(done)
    assert done.returncode == 1, done.stderr
    assert report["policy"]["source"] == "option"
    assert any(f["kind"] == "new_rejection" for f in report["findings"])


def test_a_bad_repository_name_is_bad_usage_in_json_too(example_clone: Path, tmp_path: Path) -> None:
    done = run("check", "--repo", str(example_clone), "--base", "origin/base", "--head", "HEAD",
               "--repository", "miles", "--format", "json", cache=tmp_path / "cache")
    assert done.returncode == 2
    assert report_of(done)["error"] == {
        "kind": "usage",
        "message": "error: --repository: expected owner/name (e.g. radixark/miles), got 'miles'"}


def test_every_report_form_names_the_policy() -> None:
    origin = builtin_for(None, None)[1]
    fast = CheckReport("b" * 40, "c" * 40, validation_changed=False, changed_paths=("README.md",),
                       policy=origin)
    said = "policy: default (no policy for this repository)"
    assert said in render(fast, "text").splitlines()
    assert said + "  " in render(fast, "markdown").splitlines()
    assert json.loads(render(fast, "json"))["policy"] == origin.to_json()
    assert f"<br>{said}</sub>" in comment_markdown(fast)
    assert f"<br>{said}</sub>" in check_output(fast).summary
