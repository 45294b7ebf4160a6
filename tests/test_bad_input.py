"""Every command given bad input says so in one line a user can act on, exits 2, and shows no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.analysis.core.policy import PolicyError, parse_policy
from app.cli import main
from app.demo.localgithub import make_app_key

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "incident"
KEY = make_app_key().private_pem
APP = {"GITHUB_APP_ID": "1", "GITHUB_WEBHOOK_SECRET": "s3cr3t", "GITHUB_PRIVATE_KEY": KEY}
MISSPELT_POLICY = """\
validation:
  paths: ["arguments.py"]
  entry: "arguments:parse_args"
  unknwon_flags: error
matrix:
  sources: [{kind: static, suites: []}]
"""

# (what is wrong, argv after `prtriage`, environment, what the one line must name)
CASES = [
    ("serve port too large", ["serve", "--port", "99999"], {},
     "--port: 99999 is not a port number (1-65535)"),
    ("serve port 0", ["serve", "--port", "0"], {}, "0 is not a port number (1-65535)"),
    ("serve port not a number", ["serve", "--port", "http"], {}, "'http' is not a port number"),
    ("demo port too large", ["demo", "--once", "--port", "99999"], {},
     "99999 is not a port number (0-65535)"),
    ("demo port negative", ["demo", "--port", "-1"], {}, "-1 is not a port number (0-65535)"),
    ("PRTRIAGE_PORT for serve", ["serve"], {**APP, "PRTRIAGE_PORT": "99999"},
     "PRTRIAGE_PORT: must be at most"),
    ("PRTRIAGE_PORT for demo", ["demo", "--once"], {"PRTRIAGE_PORT": "65536"}, "PRTRIAGE_PORT: 65536 is not"),
    ("PRTRIAGE_WORKERS negative", ["worker"], {**APP, "PRTRIAGE_WORKERS": "-1"},
     "PRTRIAGE_WORKERS: must be at least 0"),
    ("PRTRIAGE_WORKERS too many", ["serve"], {**APP, "PRTRIAGE_WORKERS": "1000"},
     "PRTRIAGE_WORKERS: must be at most 64"),
    ("PRTRIAGE_WORKERS not a number", ["serve"], {**APP, "PRTRIAGE_WORKERS": "two"},
     "PRTRIAGE_WORKERS: expected a whole number"),
    ("PRTRIAGE_RESYNC_SECONDS too small", ["serve"], {**APP, "PRTRIAGE_RESYNC_SECONDS": "1"},
     "PRTRIAGE_RESYNC_SECONDS: must be at least 10"),
    ("GITHUB_APP_ID not a number", ["serve"], {**APP, "GITHUB_APP_ID": "my-app"},
     "GITHUB_APP_ID: expected a whole number"),
    ("PRTRIAGE_CACHE_MAX_SIZE", ["serve"], {**APP, "PRTRIAGE_CACHE_MAX_SIZE": "lots"},
     "PRTRIAGE_CACHE_MAX_SIZE: 'lots' is not a size"),
    ("cache prune --max-size", ["cache", "prune", "--max-size", "12XB"], {},
     "--max-size: '12XB' is not a size"),
    ("DATABASE_URL not a URL", ["db", "upgrade"], {"DATABASE_URL": "s3cr3t"},
     "DATABASE_URL: not a PostgreSQL or SQLite URL"),
    ("DATABASE_URL of another database", ["db", "upgrade"], {"DATABASE_URL": "mysql://u:s3cr3t@host/db"},
     "DATABASE_URL: not a PostgreSQL or SQLite URL"),
    ("QUEUE_URL", ["serve"], {**APP, "QUEUE_URL": "http://queue"}, "QUEUE_URL: unsupported scheme 'http'"),
    ("host not of this machine", ["serve", "--host", "192.0.2.1", "--port", "18999"], APP,
     "192.0.2.1 is not an address of this machine"),
    ("host not a name", ["serve", "--host", "no-such-host.invalid", "--port", "18999"], APP,
     "cannot listen on 'no-such-host.invalid'"),
    ("PRTRIAGE_LOG_LEVEL", ["cache", "prune"], {"PRTRIAGE_LOG_LEVEL": "LOUD"},
     "PRTRIAGE_LOG_LEVEL: unknown level"),
    ("unknown option", ["check", "--bogus"], {}, "unrecognized arguments: --bogus"),
    ("no command", [], {}, "required: COMMAND"),
    ("check without revisions", ["check"], {}, "check: give --repo PATH --base REV --head REV"),
    ("check of a missing tree", ["check", "--base-tree", "nowhere", "--head-tree", "nowhere"], {},
     "nowhere: not a directory"),
    ("check with a missing policy", ["check", "--base-tree", str(EXAMPLE / "base"), "--head-tree",
                                     str(EXAMPLE / "head"), "--policy", "missing.yml"], {},
     "missing.yml: cannot read policy"),
    ("check with a misspelt policy key", ["check", "--base-tree", str(EXAMPLE / "base"), "--head-tree",
                                          str(EXAMPLE / "head"), "--policy", "misspelt.yml"], {},
     "misspelt.yml: validation: unknown key `unknwon_flags`, did you mean `unknown_flags`?"),
    ("matrix format", ["matrix", "--tree", ".", "--format", "yaml"], {}, "invalid choice: 'yaml'"),
    ("doctor without a revision", ["doctor"], {}, "doctor: give --repo PATH --rev REV, or --tree DIR"),
    ("replay without a file", ["replay"], {}, "required: FILE"),
    ("replay of a missing file, before any setting", ["replay", "/no/such/file"], {},
     "replay: /no/such/file: no such file"),
    ("init of a missing directory", ["init", "--repo", "/no/such/dir"], {},
     "init: --repo /no/such/dir: no such directory"),
    ("check of a missing repository", ["check", "--repo", "/no/such/dir", "--base", "a", "--head", "b"], {},
     "--repo /no/such/dir: no such directory"),
]


def clean_environment(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    kept = {name: value for name, value in os.environ.items()
            if not name.startswith(("PRTRIAGE_", "GITHUB_", "DATABASE_URL", "QUEUE_URL", "DASHBOARD_TOKEN"))}
    return {**kept, "HOME": str(tmp_path), "PRTRIAGE_DATA_DIR": str(tmp_path / "data"), **env}


def assert_one_line_exit_2(status: int, stdout: str, stderr: str, named: str) -> None:
    assert "Traceback" not in stdout + stderr, stderr
    assert status == 2, stdout + stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert named in stderr, stderr
    assert "s3cr3t" not in stderr and "BEGIN RSA" not in stderr


@pytest.mark.parametrize(("what", "argv", "env", "named"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_and_exit_2(what: str, argv: list[str], env: dict[str, str], named: str,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """In process, through the console script's own `main` (the subprocess test below covers the rest)."""
    (tmp_path / "misspelt.yml").write_text(MISSPELT_POLICY)
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in clean_environment(tmp_path, env).items():
        monkeypatch.setenv(name, value)
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own exits
        status = int(exit_.code or 0)
    captured = capsys.readouterr()
    assert_one_line_exit_2(status, captured.out, captured.err, named)


@pytest.mark.parametrize(("argv", "env", "named"), [
    (["serve", "--port", "99999"], {}, "99999 is not a port number"),
    (["demo", "--once"], {"PRTRIAGE_PORT": "99999"}, "99999 is not a port number"),
    (["db", "upgrade"], {"DATABASE_URL": "s3cr3t"}, "DATABASE_URL: not a PostgreSQL or SQLite URL"),
])
def test_the_installed_command_too(argv: list[str], env: dict[str, str], named: str, tmp_path: Path) -> None:
    prtriage = Path(sys.executable).parent / "prtriage"
    done = subprocess.run([str(prtriage), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False, env=clean_environment(tmp_path, env))
    assert_one_line_exit_2(done.returncode, done.stdout, done.stderr, named)


@pytest.mark.parametrize(("text", "says"), [
    (MISSPELT_POLICY, "validation: unknown key `unknwon_flags`, did you mean `unknown_flags`?"),
    (MISSPELT_POLICY.replace("unknwon_flags: error", "xyzzy: 1"),
     "validation: unknown key `xyzzy` (known here: `attribute_defaults`, `entry`, `functions`"),
    (MISSPELT_POLICY.replace("unknwon_flags", "unknown_flags").replace(
        "[{kind: static, suites: []}]", "[{kind: record_launches, scripts: [a], entry: b, launcher: [c]}]"),
     "matrix.sources[0]: unknown key `launcher`, did you mean `launchers`?"),
    (MISSPELT_POLICY.replace("unknwon_flags", "unknown_flags").replace("kind: static", "kind: statc"),
     "matrix.sources[0]: unknown kind `statc` (expected 'record_launches', 'workflow_rows', 'static', "
     "'python_definitions', 'workflow_steps', 'yaml_args', 'pytest_launches', 'computed_matrix')"),
    (MISSPELT_POLICY.replace("unknwon_flags: error", "unknown_flags: warn"),
     "validation.unknown_flags: expected 'error' or 'ignore'"),
    (MISSPELT_POLICY.replace("unknwon_flags: error", "unknown_flags: error")
     + "harness:\n  limits:\n    suite_seconds: soon\n",
     "harness.limits.suite_seconds: expected a number"),
    (MISSPELT_POLICY.replace("unknwon_", "unknown_").replace("[{kind: static, suites: []}]",
                                                             "[{kind: record_launches, entry: b}]"),
     "matrix.sources[0].scripts: required, missing"),
    (MISSPELT_POLICY.replace("  entry: \"arguments:parse_args\"\n", "  mode: validator\n")
     .replace("unknwon_", "unknown_"),
     "validation: entry: a validator must be named (`package.module:function`) unless each launch runs to "
     "its training boundary (mode: boundary)"),
    (MISSPELT_POLICY.replace('entry: "arguments:parse_args"', 'entry: ["arguments:parse_args", "bad"]')
     .replace("unknwon_", "unknown_"),
     "validation.entry: expected 'package.module:attribute', got 'bad'"),
    (MISSPELT_POLICY.replace("suites: []", "suites: [{argv: []}]").replace("unknwon_", "unknown_"),
     "matrix.sources[0].suites[0].id: required, missing"),
])
def test_policy_errors_in_plain_words(text: str, says: str) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, "policy.yml")
    assert str(raised.value).startswith(f"policy.yml: {says}"), str(raised.value)


def test_nothing_found_by_the_default_policy_says_how_to_write_one(tmp_path: Path) -> None:
    """The example keeps its CI script under ci/, where the default policy does not look."""
    done = subprocess.run([sys.executable, "-m", "app.cli", "check", "--base-tree", str(EXAMPLE / "base"),
                           "--head-tree", str(EXAMPLE / "head"), "--cache-dir", str(tmp_path / "cache")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                          env=clean_environment(tmp_path, {}))
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "no CI suite captured at head (0 CI scripts match tests/**/test_*.py)" in done.stderr
    assert "the default policy (" in done.stderr and "policies/default.yml)" in done.stderr
    assert "in **/arguments.py, **/args.py, train.py" in done.stderr
    assert f"prtriage doctor --tree {EXAMPLE / 'base'} --policy FILE" in done.stderr
    own = tmp_path / "own.yml"
    own.write_text((ROOT / "policies" / "default.yml").read_text().replace("tests/**/test_*.py", "none/*.py"))
    done = subprocess.run([sys.executable, "-m", "app.cli", "check", "--base-tree", str(EXAMPLE / "base"),
                           "--head-tree", str(EXAMPLE / "head"), "--policy", str(own)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                          env=clean_environment(tmp_path, {}))
    assert done.returncode == 3 and "match none/*.py" in done.stderr
    assert "the default policy" not in done.stderr  # a policy of its own: no advice about the default
