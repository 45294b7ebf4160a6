"""fsfakes in a real Python process: fixtures served, CI-host prefixes existing, repository reads recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"

HARNESS_POLICY = {
    "fixtures": [
        {"path": "/root/models/*/config.json", "name": "hf_config", "content": {"num_hidden_layers": 28}},
        {"path": "/root/models/*_miles/latest_checkpointed_iteration.txt", "content": "0"},
    ],
    "existing_path_prefixes": ["/root/", "/personal/"],
}


def run_probe(repo: Path, body: str, policy: dict[str, Any] = HARNESS_POLICY) -> Any:
    """Run `body` in a fresh interpreter after fsfakes.install; it prints one JSON value as its last line."""
    probe = textwrap.dedent("""
        import json, os, pathlib, sys
        sys.path.insert(0, {harness!r})
        import fsfakes
        os.chdir({repo!r})
        sys.path.insert(0, {repo!r})
        fsfakes.install({repo!r}, json.loads({policy!r}))
    """).format(harness=str(HARNESS), repo=str(repo), policy=json.dumps(policy))
    script = repo.parent / "probe.py"
    script.write_text(probe + textwrap.dedent(body))
    done = subprocess.run([sys.executable, "-B", "-s", str(script)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "helper.py").write_text("VALUE = 1\n")
    (repo / "data.txt").write_text("hello\n")
    (repo / "written.txt").write_text("")
    (repo / "untouched.txt").write_text("never opened\n")
    return repo


def test_fixture_served_through_every_open(tmp_path: Path) -> None:
    served = run_probe(make_repo(tmp_path), """
        import io
        cfg = "/root/models/qwen/config.json"
        with open(cfg) as handle:
            via_builtin = json.load(handle)
        with io.open(cfg, "rb") as handle:
            via_io = json.loads(handle.read())
        path = pathlib.Path("/root/models/qwen_miles/latest_checkpointed_iteration.txt")
        print(json.dumps([via_builtin, via_io, json.loads(pathlib.Path(cfg).read_text()),
                          path.read_text(), path.read_bytes().decode(), path.open().read()]))
    """)
    assert served == [{"num_hidden_layers": 28}] * 3 + ["0", "0", "0"]


def test_fixture_paths_exist_as_files(tmp_path: Path) -> None:
    answers = run_probe(make_repo(tmp_path), """
        cfg = "/root/models/qwen/config.json"
        print(json.dumps([os.path.exists(cfg), os.path.isfile(cfg), pathlib.Path(cfg).exists(),
                          pathlib.Path(cfg).is_file(), os.path.exists("/elsewhere/models/q/config.json")]))
    """)
    assert answers == [True, True, True, True, False]


def test_real_file_wins_over_fixture(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    real = tmp_path / "models" / "real" / "config.json"
    real.parent.mkdir(parents=True)
    real.write_text('{"num_hidden_layers": 2}')
    policy = {"fixtures": [{"path": str(tmp_path / "models" / "*" / "config.json"), "content": {"x": 1}}]}
    answers = run_probe(repo, f"""
        print(json.dumps([json.load(open({str(real)!r})),
                          json.load(open({str(tmp_path / "models" / "absent" / "config.json")!r}))]))
    """, policy)
    assert answers == [{"num_hidden_layers": 2}, {"x": 1}]


def test_existing_prefixes_exist_without_content(tmp_path: Path) -> None:
    answers = run_probe(make_repo(tmp_path), """
        checks = [os.path.exists("/root/ckpt/iter_0000100"), os.path.isdir("/personal/data"),
                  os.path.isfile("/root/data.jsonl"), os.path.exists("/root"),
                  pathlib.Path("/personal/x").is_dir(), pathlib.Path("/root/y").exists(),
                  os.path.exists("/rootless/file"), os.path.exists("/node_public/a")]
        try:
            open("/root/data.jsonl")
            checks.append("opened")
        except FileNotFoundError:
            checks.append("FileNotFoundError")
        print(json.dumps(checks))
    """)
    assert answers == [True, True, True, True, True, True, False, False, "FileNotFoundError"]


def test_writes_are_not_served(tmp_path: Path) -> None:
    # A fixture stands in for reading only; writing to a matching path must hit the real filesystem.
    target = tmp_path / "out" / "config.json"
    target.parent.mkdir()
    policy = {"fixtures": [{"path": str(tmp_path / "out" / "*.json"), "content": "fixture"}]}
    answers = run_probe(make_repo(tmp_path), f"""
        with open({str(target)!r}, "w") as handle:
            handle.write("written")
        print(json.dumps(open({str(target)!r}).read()))
    """, policy)
    assert answers == "written"


def test_reads_records_opened_and_imported_repo_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    reads = run_probe(repo, f"""
        open("data.txt").read()
        pathlib.Path({str(repo / "pkg" / "helper.py")!r}).read_bytes()
        import pkg.helper
        open("written.txt", "w").write("w")
        open({str(outside)!r}).read()
        json.load(open("/root/models/q/config.json"))
        try:
            open("missing.txt")
        except FileNotFoundError:
            pass
        print(json.dumps(sorted(fsfakes.reads())))
    """)
    # A file read while absent is kept too: it appearing later must change the cache key.
    assert reads == ["data.txt", "missing.txt", "pkg/__init__.py", "pkg/helper.py"]


def test_reads_outside_the_repo_and_before_install_are_not_recorded(tmp_path: Path) -> None:
    reads = run_probe(make_repo(tmp_path), """
        import fsfakes as again
        again.install(os.getcwd(), {})
        open("/etc/hostname").close() if os.path.exists("/etc/hostname") else None
        print(json.dumps(sorted(fsfakes.reads())))
    """)
    assert reads == []
