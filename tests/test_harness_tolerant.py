"""tolerant in a real Python process: parsers handed to absent code; HF configs served, following arguments.

Each probe installs the harness the way validate.py does (fsfakes, stubs, argparse patches, replacements)
and imports one repository module whose RESULT is printed as JSON.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from probes import run_probe_program

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"

MEGATRON_PARSER = {"target": "megatron.training.arguments:parse_args", "with": "argparse_with_provider",
                   "provider_kwarg": "extra_args_provider"}


def run_validation_module(tmp_path: Path, source: str, validation: dict[str, Any],
                          harness: dict[str, Any]) -> Any:
    """Import `pkg.mod` (the given source) under the validation harness's patches; its RESULT, as JSON."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "mod.py").write_text(textwrap.dedent(source))
    probe = textwrap.dedent(f"""
        import json, os, sys
        sys.path[:0] = [{str(HARNESS)!r}, {str(repo)!r}]
        import fsfakes, stubs, tolerant
        os.chdir({str(repo)!r})
        validation, harness = json.loads({json.dumps(validation)!r}), json.loads({json.dumps(harness)!r})
        fsfakes.install({str(repo)!r}, harness)
        stubs.install({str(repo)!r}, harness)
        tolerant.install_argparse_patches({str(repo)!r}, validation.get("attribute_defaults") or {{}})
        tolerant.install_replacements({str(repo)!r}, validation, harness)
        import pkg.mod
        print(json.dumps(pkg.mod.RESULT))
    """)
    return run_probe_program(tmp_path, probe)


def test_a_parser_handed_to_absent_code_tolerates_the_flags_that_code_would_define(tmp_path: Path) -> None:
    # radixark/miles: the FSDP backend builds `argparse.ArgumentParser(...)`, its extra-args provider hands
    # it to SGLang (`ServerArgs.add_cli_args(parser)`, absent here) and calls `parser.parse_args()`.
    result = run_validation_module(tmp_path, """
        import argparse
        import tolerant
        from sglang.srt.server_args import ServerArgs

        def fsdp_parser(fed):
            parser = argparse.ArgumentParser("FSDP training")
            parser.add_argument("--lr", type=float, default=1e-5)
            if fed:
                ServerArgs.add_cli_args(parser)
            return parser

        argv = ["--lr", "1e-6", "--sglang-mem-fraction-static", "0.75", "--sglang-enable-dp-attention"]
        fed = fsdp_parser(True).parse_args(argv)
        tolerated = list(tolerant.ledger.tolerated_flags)
        try:
            fsdp_parser(False).parse_args(argv)
            strict = "accepted"
        except SystemExit as exc:
            strict = str(exc.code)
        try:
            fsdp_parser(True).parse_args(["--lr", "fast"])
            invalid = "accepted"
        except SystemExit as exc:
            invalid = str(exc.code)
        RESULT = {"fed": vars(fed), "tolerated": tolerated, "strict": strict, "invalid": invalid}
    """, {}, {})
    assert result["fed"] == {"lr": 1e-6, "sglang_mem_fraction_static": 0.75,
                             "sglang_enable_dp_attention": True}
    assert result["tolerated"] == ["--sglang-mem-fraction-static", "--sglang-enable-dp-attention"]
    # a parser no absent code saw stays strict, and the options it defines still parse strictly
    assert result["strict"] == ("unrecognized arguments: --sglang-mem-fraction-static 0.75 "
                                "--sglang-enable-dp-attention")
    assert result["invalid"] == "argument --lr: invalid float value: 'fast'"


HF_FIXTURES = {
    "existing_path_prefixes": ["/root/"],
    "fixtures": [
        # the first fixture that matches serves a path: the GLM-5 checkpoint's own config before the others
        {"path": "/root/models/GLM-5*_5layer/config.json",
         "content": {"model_type": "glm_moe_dsa", "num_hidden_layers": 5}},
        {"path": "/root/models/*/config.json",
         "content": {"model_type": "qwen2", "hidden_size": 2048, "num_hidden_layers": 28}},
        {"path": "/fixtures/hf/config.json", "name": "hf_config",
         "content": {"model_type": "named", "hidden_size": 1, "num_hidden_layers": 1}},
    ],
}
HF_CONFIG = {"target": "transformers:AutoConfig.from_pretrained", "with": "fixture_namespace",
             "fixture": "hf_config", "fixture_file": "config.json",
             "from_args": {"hidden_size": "hidden_size", "num_hidden_layers": "num_layers",
                           "tie_word_embeddings": "not untie_embeddings_and_output_weights"}}
LOAD_CONFIGS = """
    import sys
    from megatron.training.arguments import parse_args
    from transformers import AutoConfig

    def provider(parser):
        parser.add_argument("--hf-checkpoint")
        return parser

    def config_for(argv):
        sys.argv = ["train.py", *argv]
        args = parse_args(extra_args_provider=provider)
        return AutoConfig.from_pretrained(args.hf_checkpoint, trust_remote_code=True).to_dict()

    RESULT = [
        config_for(["--hf-checkpoint", "/root/models/GLM-5.2_5layer", "--hidden-size", "6144",
                    "--num-layers", "5", "--untie-embeddings-and-output-weights"]),
        config_for(["--hf-checkpoint", "/root/models/Qwen3-4B", "--hidden-size", "2560",
                    "--num-layers", "36"]),
        config_for(["--hf-checkpoint", "/root/models/Qwen3-0.6B"]),
        config_for(["--hf-checkpoint", "/data/nowhere", "--num-layers", "2"]),
    ]
"""


def test_hf_configs_come_from_the_served_config_json_and_follow_the_suite_arguments(tmp_path: Path) -> None:
    # radixark/miles: hf_validate_args compares the checkpoint's config with hidden_size, num_layers ...;
    # a CI host's checkpoint matches the model arguments its scripts pass.
    validation = {"attribute_defaults": {"untie_embeddings_and_output_weights": False},
                  "replace": [MEGATRON_PARSER, HF_CONFIG]}
    glm, qwen, bare, nowhere = run_validation_module(tmp_path, LOAD_CONFIGS, validation, HF_FIXTURES)
    # the config.json the harness serves under the checkpoint, its keys overridden by the arguments
    assert glm == {"model_type": "glm_moe_dsa", "num_hidden_layers": 5, "hidden_size": 6144,
                   "tie_word_embeddings": False}
    assert qwen == {"model_type": "qwen2", "hidden_size": 2560, "num_hidden_layers": 36,
                    "tie_word_embeddings": True}
    # arguments the suite does not set leave the served values; a default (attribute_defaults) still counts
    assert bare == {"model_type": "qwen2", "hidden_size": 2048, "num_hidden_layers": 28,
                    "tie_word_embeddings": True}
    # nothing served under the directory: the named fixture's values
    assert nowhere == {"model_type": "named", "hidden_size": 1, "num_hidden_layers": 2,
                       "tie_word_embeddings": True}


def test_without_fixture_file_or_from_args_the_named_fixture_is_served_as_is(tmp_path: Path) -> None:
    plain = {key: value for key, value in HF_CONFIG.items() if key not in ("fixture_file", "from_args")}
    validation = {"replace": [MEGATRON_PARSER, plain]}
    configs = run_validation_module(tmp_path, LOAD_CONFIGS, validation, HF_FIXTURES)
    assert configs == [{"model_type": "named", "hidden_size": 1, "num_hidden_layers": 1}] * 4
