"""The validation harness program on a miles-shaped repository, run by the real bubblewrap sandbox."""

from __future__ import annotations

from pathlib import Path

from harness_twin import (
    ARGUMENTS,
    job,
    line_of,
    make_twin,
    miles_policy,
    results,
    run_plain,
    run_sandboxed,
    suite,
)

from app.analysis.core.model import LearnedAttribute, Outcome

ARGS = "miles/utils/arguments.py"
QWEN = "--hf-checkpoint /root/models/qwen/config.json"


def test_outcomes_say_accepted_or_where_validation_rejected(tmp_path: Path) -> None:
    repo = make_twin(tmp_path)
    found = results(run_sandboxed(repo, job([
        suite("plain", f"{QWEN} --rollout-batch-size 8"),
        suite("indivisible", f"{QWEN} --rollout-batch-size 3 --tensor-model-parallel-size 2"),
        suite("lora-colocate", f"{QWEN} --lora-rank 8 --colocate --disable-weights-backuper"),
        suite("lora-apart", f"{QWEN} --lora-rank 8 --disable-weights-backuper"),
        suite("pipeline", f"{QWEN} --pipeline-model-parallel-size 3 --rollout-batch-size 6"),
    ])))
    assert found["plain"].outcome == Outcome("accepted")
    assert found["lora-apart"].outcome == Outcome("accepted")
    assert found["indivisible"].outcome == Outcome(
        "rejected", "AssertionError", "rollout batch size must divide by tp * pp", ARGS,
        line_of(repo, ARGS, "assert args.rollout_batch_size % world"))
    # --colocate turned offload_train on, which is what the assert rejects together with the backuper
    assert found["lora-colocate"].outcome == Outcome(
        "rejected", "AssertionError", "lora with colocate and offload needs the weights backuper", ARGS,
        line_of(repo, ARGS, "assert not (args.colocate"))
    assert found["pipeline"].outcome == Outcome(
        "rejected", "ValueError", "layers must divide by pp", ARGS, line_of(repo, ARGS, "raise ValueError"))


def test_repository_parser_rejects_a_flag_it_does_not_define(tmp_path: Path) -> None:
    repo = make_twin(tmp_path)
    argv = "--train-backend fsdp --lora-rank 4 --no-such 1"
    found = results(run_sandboxed(repo, job([suite("fsdp", argv)])))
    assert found["fsdp"].outcome == Outcome("rejected", "SystemExit", "unrecognized arguments: --no-such 1",
                                            ARGS, line_of(repo, ARGS, ".parse_args()"))
    assert found["fsdp"].known_flags == ("--train-backend", "--lora-rank")
    assert found["fsdp"].tolerated_flags == ()


def test_flags_of_the_absent_upstream_parser_are_set_generically(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, ARGUMENT_CHECKS)
    argv = (f"{QWEN} --tensor-model-parallel-size 2 --sglang-mem-fraction 0.7 --no-x --sglang-ports 30 31 "
            "--model-name=qwen --use-dist-ckpt --lr -1e-5 --colocate")
    found = results(run_sandboxed(repo, job([suite("tolerant", argv)])))["tolerant"]
    assert found.outcome == Outcome("accepted"), found.events
    assert found.events == ()
    assert found.tolerated_flags == ("--tensor-model-parallel-size", "--sglang-mem-fraction", "--no-x",
                                     "--sglang-ports", "--model-name", "--use-dist-ckpt", "--lr")
    assert found.known_flags == ("--hf-checkpoint", "--colocate")


ARGUMENT_CHECKS = """\
assert args.tensor_model_parallel_size == 2
assert args.sglang_mem_fraction == 0.7
assert args.x is False
assert args.sglang_ports == [30, 31]
assert args.model_name == "qwen"
assert args.use_dist_ckpt is True
assert args.lr == -1e-5
assert args.colocate is True
assert args.pipeline_model_parallel_size == 1
assert args.hf_config.num_hidden_layers == 28
assert args.hf_config.to_dict()["model_type"] == "qwen2"
assert args.hf_config.get("absent", 5) == 5 and args.hf_config["hidden_size"] == 2048
"""


def test_attributes_no_parser_defines_are_learned_where_they_are_read(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        world = args.tensor_model_parallel_size * args.pipeline_model_parallel_size
        assert args.rollout_batch_size % world == 0, "indivisible"
        if args.micro_batch_size is None:
            args.micro_batch_size = 1
        assert getattr(args, "never_set", "fallback") == "fallback"
    """)
    found = results(run_sandboxed(repo, job([suite("fsdp", f"--train-backend fsdp {QWEN}")])))["fsdp"]
    assert found.outcome == Outcome("accepted")
    world = line_of(repo, ARGS, "world = args.tensor_model_parallel_size")
    assert found.learned == (LearnedAttribute("tensor_model_parallel_size", ARGS, world),
                             LearnedAttribute("pipeline_model_parallel_size", ARGS, world),
                             LearnedAttribute("micro_batch_size", ARGS,
                                              line_of(repo, ARGS, "if args.micro_batch_size")))
    assert found.events == ()  # record mode ran with the same learned defaults


def test_attributes_read_after_a_replaced_upstream_parser_are_marked_upstream(tmp_path: Path) -> None:
    # The Megatron backend's arguments come from the replaced Megatron parser, which would have defined
    # optimizer_cpu_offload: the read is the harness's blindness, not the repository's undefined option.
    repo = make_twin(tmp_path, "assert not args.optimizer_cpu_offload\n")
    found = results(run_sandboxed(repo, job([suite("megatron", QWEN),
                                             suite("fsdp", f"--train-backend fsdp {QWEN}")])))
    read = line_of(repo, ARGS, "assert not args.optimizer_cpu_offload")
    stood_in = LearnedAttribute("optimizer_cpu_offload", ARGS, read, upstream=True)
    assert found["megatron"].learned == (stood_in,)
    assert found["fsdp"].learned == (LearnedAttribute("optimizer_cpu_offload", ARGS, read, upstream=False),)


def test_the_suite_environment_reaches_validation(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        if os.environ.get("MILES_STRICT") == "1":
            assert args.n_samples_per_prompt > 1, "strict mode samples several answers"
    """)
    found = results(run_sandboxed(repo, job([suite("lenient", QWEN),
                                             suite("strict", QWEN, env={"MILES_STRICT": "1"}),
                                             suite("strict-ok", f"{QWEN} --n-samples-per-prompt 4",
                                                   env={"MILES_STRICT": "1"})])))
    assert found["lenient"].outcome.outcome == "accepted"
    assert found["strict"].outcome.message == "strict mode samples several answers"
    assert found["strict-ok"].outcome.outcome == "accepted"


def test_a_variable_read_at_import_gets_its_own_import(tmp_path: Path) -> None:
    repo = make_twin(tmp_path)
    on = {"MILES_EXPERIMENTAL_ROLLOUT_REFACTOR": "1"}
    refactor = "--train-backend fsdp --rollout-refactor-mode old"
    found = results(run_sandboxed(repo, job([suite("classic", "--train-backend fsdp"),
                                             suite("refactor-off", refactor),
                                             suite("refactor-on", refactor, env=on),
                                             suite("plain-on", "--train-backend fsdp", env=on)])))
    assert found["refactor-on"].outcome.outcome == "accepted"
    assert "--rollout-refactor-mode" in found["refactor-on"].known_flags
    assert found["refactor-off"].outcome.message == "unrecognized arguments: --rollout-refactor-mode old"
    assert {found["classic"].outcome.outcome, found["plain-on"].outcome.outcome} == {"accepted"}


def test_a_dying_or_hanging_suite_is_an_error_and_the_others_are_not(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import time
        if args.n_samples_per_prompt == 9:
            os.kill(os.getpid(), 9)
        if args.n_samples_per_prompt == 7:
            time.sleep(3600)
        if args.n_samples_per_prompt == 5:
            os._exit(0)
    """)
    # The first suite of a group warms its leader up: killing it must not cost the group.
    found = results(run_sandboxed(repo, job([
        suite("killed-first", f"{QWEN} --n-samples-per-prompt 9"), suite("fine", QWEN),
        suite("hangs", f"{QWEN} --n-samples-per-prompt 7"),
        suite("exits", f"{QWEN} --n-samples-per-prompt 5"),
        suite("also-fine", f"{QWEN} --n-samples-per-prompt 2"),
    ], miles_policy(suite_seconds=3))))
    assert found["fine"].outcome.outcome == found["also-fine"].outcome.outcome == "accepted"
    assert found["killed-first"].outcome.outcome == "error"
    assert "killed by signal 9" in (found["killed-first"].outcome.message or "")
    assert found["hangs"].outcome.outcome == "error"
    assert "timed out" in (found["hangs"].outcome.message or "")
    assert found["exits"].outcome.outcome == "error"


def test_a_warm_up_that_hangs_costs_only_its_own_suite(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import time
        if args.n_samples_per_prompt == 7:
            time.sleep(3600)
    """)
    found = results(run_sandboxed(repo, job([suite("hangs-first", f"{QWEN} --n-samples-per-prompt 7"),
                                             suite("fine", QWEN)], miles_policy(suite_seconds=2))))
    assert found["fine"].outcome.outcome == "accepted"
    assert found["hangs-first"].outcome.outcome == "error"
    assert "timed out" in (found["hangs-first"].outcome.message or "")


def test_an_entry_that_does_not_import_is_fatal_and_every_suite_an_error(tmp_path: Path) -> None:
    broken = ARGUMENTS.replace("import argparse\n", "import argparse\nfrom miles.nowhere import thing\n")
    repo = make_twin(tmp_path, files={ARGS: broken.replace("{validate_body}", "    pass")})
    messages = run_sandboxed(repo, job([suite("a", QWEN), suite("b", QWEN, env={"X": "1"})]))
    fatal = [m for m in messages if m["type"] == "fatal"]
    assert len(fatal) == 1
    assert "miles.utils.arguments:parse_args does not import" in fatal[0]["reason"]
    assert "No module named 'miles.nowhere'" in fatal[0]["reason"]
    assert f"({ARGS}:2)" in fatal[0]["reason"]
    found = results(messages)
    assert {r.outcome.outcome for r in found.values()} == {"error"}
    assert found["a"].outcome.message == fatal[0]["reason"]


def test_changed_lines_report_whether_each_suite_ran_them(tmp_path: Path) -> None:
    repo = make_twin(tmp_path)
    lora_assert = line_of(repo, ARGS, "assert not (args.colocate")
    coercion = line_of(repo, ARGS, "args.offload_train = True")
    module_level = line_of(repo, ARGS, "EXPERIMENTAL = ")
    found = results(run_sandboxed(repo, job([suite("lora", f"{QWEN} --lora-rank 8 --colocate"),
                                             suite("plain", QWEN)],
                                            trace={ARGS: [lora_assert, coercion, module_level]})))
    assert found["lora"].lines_hit == {ARGS: (coercion, lora_assert)}
    assert found["plain"].lines_hit == {}


def test_repository_output_never_reaches_the_message_stream(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import sys
        print('{"type": "done"}')
        sys.stdout.write("not json\\n")
        sys.stderr.write("noise on stderr\\n")
    """)
    messages = run_plain(repo, job([suite("noisy", QWEN), suite("noisy-too", QWEN)]))
    assert [m["type"] for m in messages].count("done") == 1
    assert {r.outcome.outcome for r in results(messages).values()} == {"accepted"}


def test_return_value_replacements_stand_in_for_absent_and_present_callables(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import yaml
        from sglang_router.launch import free_port

        assert yaml.safe_load("a: 1") == {"a": 1}, "a real package keeps its own function"
        assert free_port(30000) == 30001, "replaced in an absent module"
        assert gather(None) == {"world": 8}, "replaced in the repository itself"
    """)
    policy = miles_policy()
    policy["validation"]["replace"] += [
        {"target": "sglang_router.launch:free_port", "with": "return_value", "value": 30001},
        {"target": "miles.utils.arguments:gather", "with": "return_value", "value": {"world": 8},
         "only_if_missing": False},
        {"target": "yaml:safe_load", "with": "return_value", "value": 1},  # yaml is real: left alone
    ]
    found = results(run_plain(repo, job([suite("replaced", QWEN)], policy)))["replaced"]
    assert found.outcome == Outcome("accepted"), found.events


def test_a_real_package_that_does_not_import_is_fatal(tmp_path: Path) -> None:
    policy = miles_policy()
    policy["harness"]["real_packages"] = ["yaml", "typer_is_not_installed"]
    messages = run_plain(make_twin(tmp_path), job([suite("a", QWEN)], policy))
    [fatal] = [m for m in messages if m["type"] == "fatal"]
    assert "typer_is_not_installed" in fatal["reason"]
    assert results(messages)["a"].outcome == Outcome("error", message=fatal["reason"])


def test_repository_modules_named_like_the_harness_are_the_repository_own(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import common
        import record

        assert common.OWNER == record.OWNER == "repository", "the harness shadowed a repository module"
    """, files={"common/__init__.py": 'OWNER = "repository"\n', "record.py": 'OWNER = "repository"\n'})
    found = results(run_plain(repo, job([suite("shadow", QWEN)])))["shadow"]
    assert found.outcome == Outcome("accepted"), found.outcome


TRACED_BODY = """\
    import sys
    assert sys.gettrace() is None, "the harness set a tracer"

    def helper(value):
        \"\"\"Helper doc.\"\"\"
        return value + 1

    assert helper.__doc__ == "Helper doc." and helper(1) == 2
    if args.lora_rank > 8:
        size = 3
    elif args.lora_rank > 0:
        size = 2
    else:
        size = 1
    try:
        {}["missing"]
    except KeyError:
        size += 10
    assert size < 12 or args.rollout_batch_size > 8, "lora needs a bigger batch"
"""


def test_traced_statements_report_themselves_and_nothing_else_changes(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, TRACED_BODY)
    markers = ["sys.gettrace()", '"""Helper doc."""', "return value + 1", "elif args.lora_rank", "size = 2",
               "size += 10", "assert size < 12"]
    line = {marker: line_of(repo, ARGS, marker) for marker in markers}
    found = results(run_sandboxed(repo, job([suite("lora", f"{QWEN} --lora-rank 4"), suite("plain", QWEN)],
                                            trace={ARGS: sorted(line.values())})))
    # no tracer is left for the repository to see; the docstring stays one; the rejection keeps its line
    assert found["lora"].outcome == Outcome("rejected", "AssertionError", "lora needs a bigger batch", ARGS,
                                            line["assert size < 12"])
    assert found["plain"].outcome == Outcome("accepted")
    ran = [line[m] for m in markers if m not in ('"""Helper doc."""', "size = 2")]
    assert found["lora"].lines_hit == {ARGS: tuple(sorted([*ran, line["size = 2"]]))}
    assert found["plain"].lines_hit == {ARGS: tuple(ran)}


def test_the_terminal_size_argparse_asks_for_is_the_one_the_suite_would_see(tmp_path: Path) -> None:
    repo = make_twin(tmp_path, """\
        import shutil
        columns = os.environ.get("COLUMNS")
        assert tuple(shutil.get_terminal_size()) == (int(columns or 80), 24), shutil.get_terminal_size()
        assert tuple(shutil.get_terminal_size((100, 50))) == (int(columns or 100), 50)
    """)
    # the sandbox's environment has neither COLUMNS nor LINES: only the suite can set them
    found = results(run_sandboxed(repo, job([suite("plain", QWEN),
                                             suite("wide", QWEN, env={"COLUMNS": "123"})])))
    assert found["plain"].outcome == Outcome("accepted"), found["plain"].outcome
    assert found["wide"].outcome == Outcome("accepted"), found["wide"].outcome


CACHED_SWITCH = """\
    cache = globals().setdefault("_STRICT", [])
    if not cache:
        cache.append(os.environ.get("MILES_STRICT") == "1")
    assert False, f"strict={cache[0]} imported by {IMPORTED_BY}"
"""


def test_a_variable_read_at_call_time_costs_a_warm_up_not_an_import(tmp_path: Path) -> None:
    source = ARGUMENTS.replace("{validate_body}", CACHED_SWITCH.rstrip("\n"))
    repo = make_twin(tmp_path, files={ARGS: source + "\nIMPORTED_BY = os.getpid()\n"})
    strict = {"MILES_STRICT": "1"}
    found = results(run_sandboxed(repo, job([suite("lenient", QWEN), suite("strict", QWEN, env=strict),
                                             suite("lenient-too", QWEN),
                                             suite("strict-too", QWEN, env=strict)])))
    messages = {suite_id: result.outcome.message or "" for suite_id, result in found.items()}
    # the value the warm-up cached never reaches a suite that sets the variable otherwise ...
    assert {s: m.split()[0] for s, m in messages.items()} == {
        "lenient": "strict=False", "lenient-too": "strict=False", "strict": "strict=True",
        "strict-too": "strict=True"}
    # ... and all four share one import
    assert len({m.split()[-1] for m in messages.values()}) == 1


def test_a_leader_dying_at_import_costs_only_the_suites_of_its_environment(tmp_path: Path) -> None:
    crash = 'if os.environ.get("CRASH") == "1":\n    os._exit(3)\n'
    repo = make_twin(tmp_path, files={ARGS: ARGUMENTS.replace("{validate_body}", "    pass") + crash})
    found = results(run_plain(repo, job([suite("crashes", QWEN, env={"CRASH": "1"}), suite("fine", QWEN)])))
    assert found["crashes"].outcome.outcome == "error"
    assert "exited with status 3" in (found["crashes"].outcome.message or "")
    assert found["fine"].outcome == Outcome("accepted")


def test_a_replacement_target_this_revision_lacks_is_drift_unless_required(tmp_path: Path) -> None:
    # THUDM/slime: a policy replacing a function of a module that did not exist yet at an older revision
    # failed that whole revision ("cannot be reached"); the target is skipped and reported instead.
    repo = make_twin(tmp_path)
    policy = miles_policy()
    later = {"target": "miles.utils.rollout_tools:max_lora_rank", "with": "return_value", "value": None,
             "only_if_missing": False}
    policy["validation"]["replace"] = [*policy["validation"]["replace"], later]
    found = results(run_sandboxed(repo, job([suite("plain", QWEN)], policy)))["plain"]
    assert found.outcome == Outcome("accepted")
    assert found.drift == ("miles.utils.rollout_tools:max_lora_rank: ModuleNotFoundError: No module named "
                           "'miles.utils.rollout_tools'",)
    policy["validation"]["replace"][-1] = {**later, "required": True}
    messages = run_sandboxed(repo, job([suite("plain", QWEN)], policy))
    [fatal] = [m for m in messages if m["type"] == "fatal"]
    assert "replacement target 'miles.utils.rollout_tools:max_lora_rank' cannot be reached" in fatal["reason"]
    assert results(messages)["plain"].outcome.outcome == "error"


def test_the_first_entry_alternative_that_imports_at_a_revision_is_the_entry(tmp_path: Path) -> None:
    # Megatron-LM: the policy's entry did not exist yet at older revisions of the held-out history
    repo = make_twin(tmp_path)
    policy = miles_policy()
    renamed = "miles.utils.config:parse_and_validate"  # a later revision's name
    policy["validation"]["entry"] = [renamed, "miles.utils.arguments:parse_args"]
    found = results(run_sandboxed(repo, job([suite("plain", QWEN)], policy)))["plain"]
    assert found.outcome == Outcome("accepted")
    # none exists at this revision: drift, and the suite's own launch runs to its training boundary
    policy["validation"]["entry"] = [renamed, "miles.utils.arguments:nowhere"]
    messages = run_sandboxed(repo, job([suite("plain", QWEN)], policy))
    assert not [m for m in messages if m["type"] == "fatal"]
    found = results(messages)["plain"]
    assert found.drift == (f"validation.entry {renamed} or miles.utils.arguments:nowhere: none exists at "
                           "this revision; each launch ran to its training boundary instead",)
    assert found.outcome.outcome == "accepted", found.outcome
