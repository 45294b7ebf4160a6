"""fsfakes in a real Python process: fixtures served, CI-host paths readable or listable, writes kept."""

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


def test_existing_prefixes_exist_as_readable_files_or_listable_directories(tmp_path: Path) -> None:
    # The real failure on radixark/miles: `tracker.exists()` was true for
    # /root/<model>_torch_dist/latest_checkpointed_iteration.txt but `tracker.read_text()` raised.
    answers = run_probe(make_repo(tmp_path), """
        tracker = pathlib.Path("/root/Qwen3-4B_torch_dist/latest_checkpointed_iteration.txt")
        checks = [tracker.exists(), tracker.is_file(), tracker.read_text(), os.path.getsize(tracker),
                  os.path.isdir("/root/Qwen3-0.6B_torch_dist"), os.listdir("/root/Qwen3-0.6B_torch_dist"),
                  os.path.exists("/root"), pathlib.Path("/personal/x").is_dir(),
                  os.path.isfile("/root/data.jsonl"), open("/root/data.jsonl").read(),
                  os.path.exists("/rootless/file"), os.path.exists("/node_public/a"),
                  os.path.exists("/root/data.jsonl/inside")]
        try:
            open("/root/models")
        except IsADirectoryError:
            checks.append("IsADirectoryError")
        try:
            os.listdir("/root/data.jsonl")
        except NotADirectoryError:
            checks.append("NotADirectoryError")
        print(json.dumps(checks))
    """)
    assert answers == [True, True, "", 0, True, [], True, True, True, "", False, False, False,
                       "IsADirectoryError", "NotADirectoryError"]


def test_every_file_api_agrees_on_a_virtual_path(tmp_path: Path) -> None:
    answers = run_probe(make_repo(tmp_path), """
        import glob, stat
        model = "/root/models/qwen"
        cfg = model + "/config.json"
        listing = [sorted(os.listdir(model)), sorted(e.name for e in os.scandir(model)),
                   sorted(p.name for p in pathlib.Path(model).iterdir()), glob.glob(model + "/*.json"),
                   sorted(str(p) for p in pathlib.Path(model).glob("*")),
                   glob.glob("/root/models/*/config.json"),
                   [files for _, _, files in os.walk(model)]]
        kinds = [stat.S_ISDIR(os.stat(model).st_mode), stat.S_ISREG(os.lstat(cfg).st_mode),
                 os.path.getsize(cfg) == len(open(cfg).read()), os.access(cfg, os.R_OK),
                 os.access(cfg, os.W_OK), pathlib.Path(cfg).is_file(), os.path.lexists(cfg)]
        print(json.dumps([listing, kinds]))
    """)
    listing, kinds = answers
    # A fixture's literal name shows in its directory; a glob over a wildcard directory finds none.
    assert listing == [["config.json"], ["config.json"], ["config.json"], ["/root/models/qwen/config.json"],
                       ["/root/models/qwen/config.json"], [], [["config.json"]]]
    assert kinds == [True, True, True, True, False, True, True]


def test_fixture_directories_exist_outside_the_prefixes(tmp_path: Path) -> None:
    policy = {"fixtures": [{"path": "/data/models/*/config.json", "content": {"x": 1}}]}
    answers = run_probe(make_repo(tmp_path), """
        print(json.dumps([os.path.isdir("/data"), os.path.isdir("/data/models/m"),
                          os.listdir("/data/models/m"), os.path.exists("/data/other/m"),
                          json.load(open("/data/models/m/config.json"))]))
    """, policy)
    assert answers == [True, True, ["config.json"], False, {"x": 1}]


def test_glob_star_stays_within_one_segment(tmp_path: Path) -> None:
    policy = {"fixtures": [{"path": "/root/models/*/config.json", "content": "one"},
                           {"path": "/root/deep/**/config.json", "content": "deep"}]}
    answers = run_probe(make_repo(tmp_path), """
        print(json.dumps([open("/root/models/a/config.json").read(),
                          os.path.exists("/root/models/a/b/config.json"),
                          open("/root/deep/config.json").read(), open("/root/deep/a/b/config.json").read()]))
    """, policy)
    # `*` does not cross a `/` (the policy names no prefix here, so the nested path does not exist).
    assert answers == ["one", False, "deep", "deep"]


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


def test_writes_under_a_prefix_land_in_an_overlay_and_removals_hide_the_path(tmp_path: Path) -> None:
    # radixark/miles: tests/e2e/ft/conftest_ft/execution.py and scenario_realistic_gsm8k.py:
    #   if os.path.exists(dump_dir): shutil.rmtree(dump_dir)
    #   os.makedirs(dump_dir, exist_ok=True)
    overlay = tmp_path / "overlay"
    answers = run_probe(make_repo(tmp_path), f"""
        import shutil
        fsfakes.OVERLAY = {str(overlay)!r}  # the sandbox's is under its scratch /tmp
        dump = "/root/dumps/run"
        steps = [os.path.isdir(dump)]
        shutil.rmtree(dump)
        steps += [os.path.exists(dump), os.path.exists(dump + "/events.jsonl")]
        os.makedirs(dump)  # no exist_ok: the removal hid the directory
        with open(dump + "/args.txt", "w") as handle:
            handle.write("--lr 1e-6")
        steps += [os.path.isdir(dump), open(dump + "/args.txt").read(), os.listdir(dump),
                  os.path.getsize(dump + "/args.txt"), os.path.isdir("/root/dumps")]
        os.remove(dump + "/args.txt")
        steps += [os.path.exists(dump + "/args.txt"), os.listdir(dump)]
        os.remove("/root/models/q/config.json")  # a fixture removed is gone, the others stay
        steps += [os.path.exists("/root/models/q/config.json"), os.path.exists("/root/models/r/config.json"),
                  os.listdir("/root/models/q")]
        try:
            open("/root/models/q/config.json")
        except FileNotFoundError:
            steps.append("FileNotFoundError")
        try:
            shutil.rmtree("/rootless/dump")  # outside the prefixes: the real filesystem answers
        except FileNotFoundError:
            steps.append("real FileNotFoundError")
        print(json.dumps(steps))
    """)
    assert answers == [True, False, False, True, "--lr 1e-6", ["args.txt"], 9, True, False, [], False, True,
                       [], "FileNotFoundError", "real FileNotFoundError"]
    assert (overlay / "root" / "dumps" / "run").is_dir()  # the writes stayed in the overlay
