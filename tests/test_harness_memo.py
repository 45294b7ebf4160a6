"""What the validation harness computes once and every suite inherits: source lookups, `memoize`d
functions, compilers left out by `identity_decorator` (the speed of a revision with hundreds of suites)."""

from __future__ import annotations

from pathlib import Path

from harness_twin import job, make_twin, miles_policy, results, run_plain, run_sandboxed, suite

from app.analysis.core.model import Outcome

QWEN = "--hf-checkpoint /root/models/qwen/config.json"
DOCS = '''\
import inspect


class Config:
    size: int = 1
    """The size."""


class Factory:
    computed = []  # what each computing call was asked, inherited by the suites forked after it
    unhashable = 0

    def field_docs(self, cls, prefix=""):
        if isinstance(cls, list):
            Factory.unhashable += 1
            return {}
        Factory.computed.append(repr((cls, prefix)))
        return {"size": prefix + inspect.getsource(cls).split('"""')[1]}
'''


def _memo_policy() -> dict:
    policy = miles_policy()
    policy["validation"]["replace"] += [{"target": "miles.utils.docs:Factory.field_docs", "with": "memoize"}]
    return policy


def test_a_memoized_method_computes_once_per_arguments_and_every_suite_inherits_it(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        from miles.utils.docs import Config, Factory

        docs = Factory().field_docs(Config)
        assert docs == {"size": "The size."}, docs
        docs["size"] = "changed by one caller"
        assert Factory().field_docs(Config) == {"size": "The size."}, "a caller's change reached the next"
        assert Factory().field_docs(Config, prefix="> ") == {"size": "> The size."}
        unhashable = Factory.unhashable
        Factory().field_docs([Config])
        Factory().field_docs([Config])
        assert Factory.unhashable == unhashable + 2, "an unhashable argument calls through every time"
        assert len(Factory.computed) == len(set(Factory.computed)) == 2, Factory.computed
    """, files={"miles/utils/docs.py": DOCS})
    found = results(run_plain(repo, job([suite(f"s{n}", QWEN) for n in range(4)], _memo_policy())))
    assert {s: r.outcome for s, r in found.items()} == {f"s{n}": Outcome("accepted") for n in range(4)}


def test_without_memoize_the_same_repository_computes_again(tmp_path: Path) -> None:
    """The counterpart of the test above: its count holds because of `memoize`, not by construction."""
    repo = make_twin(tmp_path, """\
        from miles.utils.docs import Config, Factory

        Factory().field_docs(Config)
        Factory().field_docs(Config)
        assert len(Factory.computed) == len(set(Factory.computed)), "computed again"
    """, files={"miles/utils/docs.py": DOCS})
    found = results(run_plain(repo, job([suite("plain", QWEN)])))["plain"]
    assert found.outcome.outcome == "rejected"
    assert found.outcome.message == "computed again"
    memoized = results(run_plain(repo, job([suite("memo", QWEN)], _memo_policy())))["memo"]
    assert memoized.outcome == Outcome("accepted"), memoized.outcome


def test_memoize_of_something_not_a_function_is_an_import_failure(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, files={"miles/utils/docs.py": DOCS})
    policy = miles_policy()
    policy["validation"]["replace"] += [{"target": "miles.utils.docs:Factory.computed", "with": "memoize"}]
    messages = run_plain(repo, job([suite("a", QWEN)], policy))
    [fatal] = [m for m in messages if m["type"] == "fatal"]
    assert "miles.utils.docs:Factory.computed" in fatal["reason"] and "memoize" in fatal["reason"]
    assert results(messages)["a"].outcome.outcome == "error"


def test_an_identity_decorator_leaves_functions_as_they_are_in_both_forms(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        from miles.utils import fused

        assert fused.bare(2) == 3 and fused.configured(2) == 4
        assert fused.bare.__name__ == "bare" and fused.configured.__name__ == "configured"
    """, files={
        "miles/utils/jit.py": 'def compile(*args, **kwargs):\n    raise RuntimeError("compiled at import")\n',
        "miles/utils/fused.py": (
            "from miles.utils import jit\n\n\n@jit.compile\ndef bare(x):\n    return x + 1\n\n\n"
            '@jit.compile(mode="max-autotune", dynamic=False)\ndef configured(x):\n    return x * 2\n'),
    })
    policy = miles_policy()
    compile_left_out = {"target": "miles.utils.jit:compile", "with": "identity_decorator",
                        "only_if_missing": False}
    policy["validation"]["replace"].insert(0, compile_left_out)
    found = results(run_sandboxed(repo, job([suite("fused", QWEN)], policy)))["fused"]
    assert found.outcome == Outcome("accepted"), found.outcome
    without = results(run_plain(repo, job([suite("compiled", QWEN)])))["compiled"]
    assert without.outcome.outcome == "rejected"
    assert without.outcome.message == "compiled at import"


def test_source_lookups_are_read_once_and_each_caller_gets_its_own_lines(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import inspect
        import linecache

        from miles.utils.docs import Config

        lines, first = inspect.getsourcelines(Config)
        assert lines[0] == "class Config:\\n" and first == 4, (lines, first)
        lines.clear()
        real_getlines = linecache.getlines
        linecache.getlines = None  # reading the file again would fail now
        try:
            assert inspect.getsource(Config).startswith("class Config:"), "a caller's change reached the next"
        finally:
            linecache.getlines = real_getlines
    """, files={"miles/utils/docs.py": DOCS})
    found = results(run_sandboxed(repo, job([suite(f"s{n}", QWEN) for n in range(3)])))
    assert {s: r.outcome for s, r in found.items()} == {f"s{n}": Outcome("accepted") for n in range(3)}


HANDED_UP = '''\
import os


class Config:
    pass


class Factory:
    computed = []  # calls that computed in this process or the one it was forked from
    env_computed = []

    def field_docs(self, cls):
        Factory.computed.append(cls.__name__)
        return {"size": "The size."}

    def env_docs(self, cls):
        Factory.env_computed.append(cls.__name__)
        return {"size": os.environ.get("DOC_PREFIX", "") + "The size."}
'''


def test_answers_computed_reading_no_variable_reach_the_later_warm_leaders(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        from miles.utils.docs import Config, Factory

        group = os.environ["GROUP"]  # read at call time: a warm leader of its own per value
        docs, env_docs = Factory().field_docs(Config), Factory().env_docs(Config)
        assert False, f"{group} {len(Factory.computed)} {len(Factory.env_computed)} {env_docs['size']}"
    """, files={"miles/utils/docs.py": HANDED_UP})
    policy = miles_policy()
    policy["validation"]["replace"] += [{"target": f"miles.utils.docs:Factory.{name}", "with": "memoize"}
                                        for name in ("field_docs", "env_docs")]
    found = results(run_plain(repo, job([suite("a", QWEN, env={"GROUP": "a"}),
                                         suite("b", QWEN, env={"GROUP": "b", "DOC_PREFIX": "> "}),
                                         suite("c", QWEN, env={"GROUP": "c"}),
                                         suite("a-prefixed", QWEN, env={"GROUP": "a", "DOC_PREFIX": "> "})],
                                        policy)))
    said = {s: (r.outcome.message or "").split(" ", 3) for s, r in found.items()}
    # the first warm-up computed both; the later ones start with the answer that read no variable ...
    assert said["a"] == ["a", "1", "1", "The size."]
    assert said["b"][:3] == ["b", "0", "1"] and said["c"][:3] == ["c", "0", "1"]
    # ... and compute the one that read DOC_PREFIX under their own environment
    assert said["b"][3] == "> The size." and said["c"][3] == "The size."
    # a read inside a memoized call still counts for the warm-up around it: no answer of "a" reaches it
    assert said["a-prefixed"][3] == "> The size."
