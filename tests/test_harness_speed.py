"""What makes validation cheaper must not change what it finds: bytecode shared by the run's processes,
installed modules a warm-up imported preloaded by its leader, memory on huge pages before many forks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness_twin import job, make_twin, results, run_plain, run_sandboxed, suite

from app.analysis.core.model import Outcome

QWEN = "--hf-checkpoint /root/models/qwen/config.json"
HARNESS = Path(__file__).resolve().parent.parent / "app" / "sandbox" / "harness"


def _python(code: str, cwd: Path) -> str:
    """`code` in a fresh interpreter with the harness directory on its path, as validate.py runs (-B)."""
    done = subprocess.run([sys.executable, "-B", "-s", "-c", textwrap.dedent(code)], cwd=cwd, text=True,
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(HARNESS)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_repository_module_compiled_once_is_read_back_by_the_next_import(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "mod.py").write_text("VALUE = 1\n")
    out = _python(f"""
        import importlib, os, sys
        import bytecache
        bytecache.install({str(repo)!r})
        sys.path.insert(0, {str(repo)!r})
        import pkg.mod
        print(pkg.mod.VALUE, type(pkg.mod.__loader__).__name__)
        source = {str(repo / "pkg" / "mod.py")!r}
        stat = os.stat(source)
        with open(source, "w") as handle:
            handle.write("VALUE = 2\\n")  # same size, and the same mtime below: only bytecode can say 1
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        del sys.modules["pkg.mod"]
        import pkg.mod
        print(pkg.mod.VALUE)
        scratch = bytecache._scratch
        print(sorted(name for _, _, names in os.walk(scratch) for name in names))
        bytecache.remove()
        print(os.path.exists(scratch))
    """, tmp_path)
    first, second, written, left = out.splitlines()
    assert first == "1 RepoSourceLoader"
    assert second == "1"  # the second import read what the first compiled
    assert written == f"['__init__.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc', " \
                      f"'mod.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc']"
    assert not any(p.name == "__pycache__" for p in repo.rglob("*"))  # nothing written beside the source
    assert left == "False"


def test_installed_modules_keep_their_own_loader_and_bytecode(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    out = _python(f"""
        import sys
        import bytecache
        bytecache.install({str(repo)!r})
        sys.path.insert(0, {str(repo)!r})
        import json.decoder, yaml
        print(type(yaml.__loader__).__name__, type(json.decoder.__loader__).__name__)
        bytecache.remove()
    """, tmp_path)
    assert out.split() == ["SourceFileLoader", "SourceFileLoader"]


LAZY_PACKAGE = """\
import os
MODE = os.environ.get("LAZY_MODE", "off")
IMPORTED_IN = os.getpid()
"""

# GROUP is read at call time, so each value costs a warm leader; the installed module is imported by the
# first warm-up, and LAZY_MODE is read by its import
LAZY_IMPORT = """\
import lazypkg
group = os.environ["GROUP"]
assert False, f"{{group}} {{lazypkg.MODE}} {{lazypkg.IMPORTED_IN}} {{IMPORTED_BY}}"
"""


def test_the_installed_modules_a_warm_up_imported_are_imported_once_by_its_leader(tmp_path: Path) -> None:
    site = tmp_path / "site"  # outside the repository: an installed package
    site.mkdir()
    (site / "lazypkg.py").write_text(LAZY_PACKAGE)
    repo = make_twin(tmp_path, LAZY_IMPORT.format(site=str(site)))
    arguments = repo / "miles/utils/arguments.py"
    # installed packages are on the path from the start
    arguments.write_text(f"import sys\nsys.path.append({str(site)!r})\n" + arguments.read_text()
                         + "\nIMPORTED_BY = os.getpid()\n")
    found = results(run_plain(repo, job([suite("first", QWEN, env={"GROUP": "a"}),
                                         suite("second", QWEN, env={"GROUP": "b"}),
                                         suite("lazy-on", QWEN, env={"GROUP": "b", "LAZY_MODE": "on"})])))
    said = {suite_id: (result.outcome.message or "").split() for suite_id, result in found.items()}
    group, mode, imported_in, leader = range(4)
    assert {s: (m[group], m[mode]) for s, m in said.items()} == {
        "first": ("a", "off"), "second": ("b", "off"), "lazy-on": ("b", "on")}
    # the first warm-up imported it itself; the next warm leader inherited it from the leader's import
    assert said["first"][imported_in] != said["first"][leader]
    assert said["second"][imported_in] == said["second"][leader] == said["first"][leader]
    # a suite setting what that import read otherwise gets a leader of its own, which imports it anew
    assert said["lazy-on"][leader] != said["first"][leader]


def test_memory_moves_onto_huge_pages_and_a_child_still_writes_only_its_own_copy(tmp_path: Path) -> None:
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    out = _python("""
        import os
        import hugepages
        data = bytearray(64 << 20)
        data[::4096] = b"\\1" * len(data[::4096])
        print(hugepages.collapse())
        pid = os.fork()
        if pid == 0:
            data[:] = b"\\2" * len(data)
            os._exit(0 if data[12345] == 2 else 1)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), data[12345], data[4096 * 3])
        with open("/proc/self/smaps_rollup") as rollup:
            print(next(line.split()[1] for line in rollup if line.startswith("AnonHugePages")))
    """, tmp_path)
    collapsed, child, huge = out.splitlines()
    assert child == "0 0 1"  # the child's writes never reached the parent's pages
    if "[never]" in setting:
        assert int(collapsed) == 0  # where the machine says no, nothing changes
    else:
        assert int(collapsed) >= 60 << 20  # the 2 MiB-aligned part of the array, at least
        assert int(huge) * 1024 >= 60 << 20


def test_many_suites_forked_from_collapsed_leaders_answer_as_few_do(tmp_path: Path) -> None:
    repo = make_twin(tmp_path)
    sizes = [8, 3, 6, 4] * 18  # 72 suites in one warm leader: over hugepages.MIN_FORKS
    suites = [suite(f"s{i}", f"{QWEN} --rollout-batch-size {n} --tensor-model-parallel-size 2")
              for i, n in enumerate(sizes)]
    found = results(run_sandboxed(repo, job(suites)))
    assert len(found) == len(sizes)
    for i, n in enumerate(sizes):
        expected = "accepted" if n % 2 == 0 else "rejected"
        assert found[f"s{i}"].outcome.outcome == expected, found[f"s{i}"].outcome
    assert found["s1"].outcome.message == "rollout batch size must divide by tp * pp"
    assert found["s0"].outcome == Outcome("accepted")


ENTRY_SCRIPT = """\
import __future__
import sys
import observed
code = sys._getframe().f_code
observed.runs.append((__name__, __file__, sys.argv[0], sys.modules[__name__] is observed.this(), id(code),
                      bool(code.co_flags & __future__.annotations.compiler_flag)))
"""


def test_an_entry_script_runs_as_runpy_runs_it_from_code_compiled_once(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(ENTRY_SCRIPT)
    (tmp_path / "observed.py").write_text("import sys\nruns = []\ndef this():\n"
                                          "    return sys.modules[sys._getframe(1).f_globals['__name__']]\n")
    out = _python(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import entryscript, observed
        main, argv0 = sys.modules["__main__"], sys.argv[0]
        script = {str(tmp_path / "train.py")!r}
        entryscript._run(script, "__main__")
        entryscript._run(script, "__main__")
        (first, second) = observed.runs
        print(first[:4] == ("__main__", script, script, True), first[4] == second[4], first[5])
        print(sys.modules["__main__"] is main, sys.argv[0] == argv0)
    """, tmp_path)
    # as run_path: its own __main__ module, __file__ and argv[0] the script; the harness's own
    # `from __future__ import annotations` is not the script's; one code object for both runs
    assert out.splitlines() == ["True True False", "True True"]


def test_priming_survives_an_entry_script_that_takes_its_own_directory_off_sys_path(tmp_path: Path) -> None:
    """NeMo RL's examples/run_grpo_single_controller.py removes examples/ from sys.path at its top; priming
    it ended the leader with a ValueError, and every suite of the run with it."""
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "run_drop.py").write_text(
        "import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\n"
        "while here in sys.path:\n    sys.path.remove(here)\nPRIMED = True\n")
    (repo / "examples" / "run_keep.py").write_text("KEPT = True\n")
    out = _python(f"""
        import sys, entryscript
        before = list(sys.path)
        entryscript.prime({str(repo)!r}, {{"examples/run_drop.py", "examples/run_keep.py"}})
        print(sys.path == before)
    """, tmp_path)
    assert out.strip() == "True"


def test_a_launch_run_to_its_boundary_survives_a_script_that_takes_its_own_directory_off_sys_path(
        tmp_path: Path) -> None:
    """A suite's own launch (boundary mode) runs the same script as `__main__`: taking the directory off
    sys.path again raised ValueError over whatever the script ended with (2 of NeMo RL's suites)."""
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    script = repo / "examples" / "run_drop.py"
    script.write_text(
        "import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\n"
        "while here in sys.path:\n    sys.path.remove(here)\nraise SystemExit(0)\n")
    out = _python(f"""
        import sys, entryscript
        before = list(sys.path)
        sys.argv = [{str(script)!r}]
        entryscript.launch({str(repo)!r})()
        print(sys.path == before)
    """, tmp_path)
    assert out.strip() == "True"
