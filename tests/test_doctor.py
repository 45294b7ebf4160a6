"""`prtriage doctor`: its hints on real error texts, and the real command on the miles twin in the sandbox."""

from __future__ import annotations

from pathlib import Path

from twin import build_miles_twin, line_of
from twin.cli import MILES_POLICY, prtriage
from twin.expected import ALL_SUITES, CKPT, DISABLED, HEALTH_SCRIPTS
from twin.variants import ARGUMENTS

from app.analysis.verdict.doctor import hint_for


def test_a_missing_absolute_file_asks_for_a_fixture_with_its_path_as_pattern() -> None:
    hint = hint_for("FileNotFoundError", "[Errno 2] No such file or directory: "
                                         "'/root/models/Qwen3-4B/generation_config.json'")
    assert hint is not None and hint.keys == ("harness.fixtures",)
    assert "'/root/models/Qwen3-4B/generation_config.json'" in hint.advice
    assert "'/root/models/*/generation_config.json'" in hint.advice


def test_a_matrix_its_producing_job_did_not_compute_names_the_github_context_and_the_globs() -> None:
    hint = hint_for(None, "matrix from pre-flight not computed: step evaluate wrote no "
                          "h100_functional_test_scripts to $GITHUB_OUTPUT; its rows are the 3 scripts the "
                          "source's globs match (tests/functional/L1_*.sh)")
    assert hint is not None and hint.keys == ("matrix.sources[].github", "matrix.sources[].scripts")
    assert hint_for(None, "a row of the computed matrix names it: no such file") is None


def test_a_ci_host_path_the_code_says_is_missing_asks_for_its_prefix() -> None:
    # radixark/miles at base-2077 under a policy without the CI hosts' directories: 12 of 105 suites
    hint = hint_for("FileNotFoundError",
                    "ref_load /root/GLM-4.7-Flash_torch_dist does not exist, please check the path.")
    assert hint is not None and hint.keys == ("harness.existing_path_prefixes", "harness.fixtures")
    assert "list '/root/' in `harness.existing_path_prefixes`" in hint.advice
    assert hint_for("FileNotFoundError", "/tmp/run/x does not exist") is None  # the sandbox's own /tmp


def test_a_present_but_unreadable_file_names_fixtures_and_existing_prefixes() -> None:
    hint = hint_for("IsADirectoryError", "[Errno 21] Is a directory: '/root/models/Qwen3-4B/config.json'")
    assert hint is not None and hint.keys == ("harness.fixtures", "harness.existing_path_prefixes")
    assert "'/root/'" in hint.advice


def test_an_empty_file_served_under_a_prefix_asks_for_its_content() -> None:
    # Under harness.existing_path_prefixes a CI host's file exists here, empty: JSON fails on its first byte.
    hint = hint_for("JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")
    assert hint is not None and hint.keys == ("harness.fixtures",)
    assert "serves empty" in hint.advice


def test_imports_attributes_and_unknown_flags_name_their_keys() -> None:
    module = hint_for("ModuleNotFoundError", "No module named 'sglang.srt'")
    assert module is not None and module.keys == ("harness.stub_modules", "harness.real_packages")
    assert "stub sglang " in module.advice
    attribute = hint_for("AttributeError", "'Namespace' object has no attribute 'kv_channels'")
    assert attribute is not None and attribute.keys == ("validation.attribute_defaults",)
    assert "`kv_channels: <its default>`" in attribute.advice
    flags = hint_for("SystemExit", "train.py: error: unrecognized arguments: --tensor-model-parallel-size 2")
    assert flags is not None and flags.keys == ("validation.unknown_flags", "validation.replace")
    # capture failures carry only a reason: the same heuristics read it
    captured = hint_for(None, "ModuleNotFoundError: No module named 'ray'")
    assert captured is not None and "stub ray " in captured.advice
    assert hint_for("AssertionError", "rollout batch size must divide by tp * pp") is None


def test_a_missing_file_the_code_names_unquoted_asks_for_a_fixture() -> None:
    # radixark/miles' scripts/run_glm5_744b_a40b.py raises its own FileNotFoundError (scripts/eval_hints.py)
    hint = hint_for(None, "FileNotFoundError: /root/models/GLM-5_4layer/config.json not found "
                          "(at scripts/run_glm5_744b_a40b.py:122)")
    assert hint is not None and hint.keys == ("harness.fixtures",)
    assert "'/root/models/*/config.json'" in hint.advice


def test_a_fixture_the_policy_names_and_does_not_define_asks_for_it() -> None:
    # a starter's `fixture_namespace` replacement before its refine round serves the fixture (miles, 68 of 68)
    hint = hint_for(None, "replacement 'transformers:AutoConfig.from_pretrained' names fixture 'hf_config', "
                          "which harness.fixtures does not define")
    assert hint is not None and hint.keys == ("harness.fixtures",)
    assert "`name: hf_config`" in hint.advice


def test_a_stubbed_packages_value_reaching_the_code_asks_for_the_real_package() -> None:
    # `sys.exit(pytest.main(...))` with pytest stubbed: miles' tests/e2e/sglang/*.py exit with the stand-in
    hint = hint_for(None, "SystemExit: <stub pytest.main()> "
                          "(at tests/e2e/sglang/test_session_v1_v2_parity.py:84)")
    assert hint is not None and hint.keys == ("harness.real_packages", "harness.requirements")
    assert "`harness.real_packages: [pytest]`" in hint.advice


def test_a_capture_out_of_time_asks_for_more_seconds() -> None:
    # RLinf's unit-test workflow steps run pytest over hundreds of tests in the capture's share of time
    hint = hint_for(None, "pytest run 1: pytest ran out of its 5.84375s after collecting 9 test(s); "
                          "pytest run 3: pytest ran out of its 5.94833s after collecting 89 test(s)")
    assert hint is not None and hint.keys == ("harness.limits.suite_seconds",)


def test_a_check_refusing_a_served_host_file_asks_for_its_content() -> None:
    # miles' GLM-5 scripts refuse the one small model's config the starter serves for every model directory
    hint = hint_for(None, "RuntimeError: /root/models/GLM-5_4layer/config.json must use native GLM-5 config "
                          "with model_type=glm_moe_dsa, architectures=[GlmMoeDsaForCausalLM], and "
                          "num_hidden_layers=4 (at scripts/run_glm5_744b_a40b.py:139)")
    assert hint is not None and hint.keys == ("harness.fixtures",)
    assert "'/root/models/GLM-5_4layer/config.json'" in hint.advice
    # a directory a test's own check found no output in is no file to serve
    events = ("partial capture: after 13 launch(es): AssertionError: Event directory /node_public/dumps/"
              "trainer_ft_deterministic_dp4_cp2/baseline/phase_a/events does not exist or is not a directory "
              "(at miles/utils/test_utils/reconfigure_assertions.py:25)")
    assert hint_for(None, events) is None


def test_a_request_the_sandbox_refuses_asks_to_replace_the_function_that_asked() -> None:
    # slime's validation asks each external SGLang server its topology (its refine round answers `{}`)
    hint = hint_for("RuntimeError", "Failed to fetch SGLang server info from http://0.0.0.0:13150: "
                    "/server_info: HTTPConnectionPool(host='0.0.0.0', port=13150): Max retries exceeded with "
                    "url: /server_info (Caused by NewConnectionError(\"HTTPConnection(host='0.0.0.0', "
                    "port=13150): Failed to establish a new connection: [Errno 111] Connection refused\")) "
                    "at slime/backends/sglang_utils/external.py:83")
    assert hint is not None and hint.keys == ("validation.replace",)


def test_a_ci_script_missing_a_runner_variable_asks_for_the_sources_env() -> None:
    # slime's test scripts `os.environ.pop("http_proxy")`, which its self-hosted runner sets
    hint = hint_for(None, "KeyError: 'http_proxy' (at tests/test_qwen2.5_0.5B_fanout_short.py:218)")
    assert hint is not None and hint.keys == ("matrix.sources[].env",)
    assert "`http_proxy: ''`" in hint.advice
    assert hint_for(None, "KeyError: 'rollout_batch_size' (at train.py:3)") is None


def test_a_version_a_stub_lacks_asks_for_its_stub_attribute() -> None:
    # verl checks vLLM's installed version before importing its rollout
    hint = hint_for("ValueError", "vllm version None not supported and SGLang also not Found. Currently "
                                  "supported vllm versions are 0.7.0+ at "
                                  "verl/third_party/vllm/__init__.py:37")
    assert hint is not None and hint.keys == ("harness.stub_attributes",)
    assert "`vllm.__version__: X`" in hint.advice


def test_an_optional_import_the_code_checks_itself_asks_for_ci_has() -> None:
    # Megatron-LM's Bert specs raise their own ImportError when `HAVE_TE` is False
    hint = hint_for("ImportError", "Transformer Engine is not installed. Please use local Bert layer spec "
                                   "instead. at megatron/core/models/bert/bert_layer_specs.py:53")
    assert hint is not None and hint.keys == ("harness.ci_has", "harness.optional_imports")
    module = hint_for("ModuleNotFoundError", "No module named 'sglang.srt'")
    assert module is not None and module.keys == ("harness.stub_modules", "harness.real_packages")


def test_a_dunder_attribute_a_stub_lacks_asks_for_the_real_package() -> None:
    # megatron/rl/__init__.py reads a pydantic model's __fields__ at import; the starter stubbed pydantic
    hint = hint_for("AttributeError", "__fields__ at megatron/rl/__init__.py:31")
    assert hint is not None and hint.keys == ("harness.real_packages", "harness.requirements")
    assert "`__fields__`" in hint.advice


def test_what_a_stubbed_package_made_asks_for_the_real_package() -> None:
    # torchtitan: `@torch.library.custom_op` on a stubbed torch leaves a plain function; tyro cannot build a
    # parser from a config field typed with stubbed grain's ReadOptions
    decorated = hint_for(None, "AttributeError: 'function' object has no attribute 'register_fake' "
                               "(at torchtitan/distributed/minimal_async_ep/api.py:648)")
    assert decorated is not None and decorated.keys == ("harness.real_packages", "harness.requirements")
    parser = hint_for("SystemExit", "2: Invalid input to tyro.cli() Could not create CLI parser from the "
                                    "provided type. • Type typing.Tuple[typing.Any, ...] with struct-type "
                                    "values requires a default value. at torchtitan/config/manager.py:40")
    assert parser is not None and parser.keys == ("harness.real_packages", "harness.requirements")


def test_doctor_on_a_healthy_revision_exits_0_and_shows_what_capture_found(
        miles_repo: Path, prtriage_cache: Path) -> None:
    result = prtriage("doctor", "--repo", str(miles_repo), "--rev", "main", "--policy", str(MILES_POLICY),
                      cache_dir=prtriage_cache)
    assert result.returncode == 0, result.describe()
    suites = len(ALL_SUITES)
    assert f"health: {suites} suites {HEALTH_SCRIPTS}; " \
           f"base accepts {suites}/{suites} (100%), rejects 0, errors 0" in result.stdout
    assert f"  disabled: {DISABLED}" in result.stdout
    assert result.stdout.splitlines()[-1] == f"healthy: the base revision accepts {suites} of {suites} CI " \
                                             "suites (100%)"


def test_doctor_on_a_blind_revision_exits_3_with_the_error_and_the_key_that_helps(
        miles_repo: Path, prtriage_cache: Path) -> None:
    result = prtriage("doctor", "--repo", str(miles_repo), "--rev", "harness_noise-base", "--policy",
                      str(MILES_POLICY), "--format", "json", cache_dir=prtriage_cache)
    assert result.returncode == 3, result.describe()
    document = result.json()
    assert document["health"]["could_analyse"] is False
    assert document["health"]["base"]["rejected"] == len(ALL_SUITES)
    # the base's one error, then the twin's partial capture (tests/test_twin_mechanisms.py), which has no hint
    diagnosis, partial = document["diagnoses"]
    assert (partial["where"], partial["subject"], partial["hint"]) == ("partial", CKPT, None)
    noise = line_of(miles_repo, "harness_noise-base", ARGUMENTS, "generation_config.json\")) as f:")
    assert (diagnosis["where"], diagnosis["count"]) == ("base", len(ALL_SUITES))
    assert diagnosis["error"].startswith("FileNotFoundError: ")
    assert diagnosis["error"].endswith(f"at {ARGUMENTS}:{noise}")
    assert diagnosis["hint"]["keys"] == ["harness.fixtures"]
    assert "/generation_config.json'" in diagnosis["hint"]["advice"]


def test_doctor_on_a_tree_without_git_and_its_text_when_blind(tmp_path: Path, prtriage_cache: Path) -> None:
    tree = build_miles_twin(tmp_path / "tree", variant="harness_noise-base")
    for path in [tmp_path, *tree.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    result = prtriage("doctor", "--tree", str(tree), "--policy", str(MILES_POLICY), cache_dir=prtriage_cache)
    assert result.returncode == 3, result.describe()
    lines = result.stdout.splitlines()
    assert lines[0] == f"doctor: {tree}"
    assert f"  x{len(ALL_SUITES)} FileNotFoundError: " in result.stdout
    assert "      try `harness.fixtures`: serve the file CI hosts have" in result.stdout
    assert lines[-1].startswith("could not analyse: the base revision rejects or errors on ")


def test_doctor_usage_errors_exit_2(miles_repo: Path, prtriage_cache: Path) -> None:
    result = prtriage("doctor", "--repo", str(miles_repo), cache_dir=prtriage_cache)
    assert result.returncode == 2
    assert "doctor: --repo needs --rev, and no --tree" in result.stderr
