"""The neutral value of an option by its name's shape, and the lines that decide a rejection (what an
assumed value must have been read on for the rejection to rest on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.sandbox.harness.assumption import deciding_spans, rests_on
from app.sandbox.harness.neutral import neutral_default


@pytest.mark.parametrize(("name", "value"), [
    # sizes: a parallelism of one
    ("sglang_data_parallel_size", 1), ("num_layers", 1),
    ("expert_model_parallel_degree", 1),
    # switches opening the name
    ("use_lora", False), ("enable_weights_backuper", False), ("no_save_optim", False), ("bf16", False),
    ("is_critic", False), ("overlap_grad_reduce", False),
    # switches inside it: an upstream parser's options under its prefix (SGLang's, in miles)
    ("sglang_enable_dp_attention", False), ("sglang_disable_cuda_graph", False),
    ("moe_use_legacy_grouped_gemm", False), ("rollout_skip_special_tokens", False),
    ("sglang_no_warmup", False), ("dp_attention_enabled", False), ("offload_disabled", False),
    # neither: None, as a CI launch that does not pass the option would most likely leave it
    # (Megatron's decoder_last_pipeline_num_layers defaults to None: `_num_` inside a name is no size)
    ("decoder_last_pipeline_num_layers", None),
    ("tokenizer_type", None), ("optimizer", None), ("this_is_name", None), ("sglang_has_foo", None),
    ("sglang_overlap", None), ("user_name", None), ("nonce", None), ("enabled_models", None),
])
def test_the_neutral_value_follows_the_name_s_shape(name: str, value: object) -> None:
    found = neutral_default(name)
    assert (type(found), found) == (type(value), value)  # 1 is no True, False no 0


VALIDATOR = '''\
def validate(args):
    assert args.tp < 4, f"tp 4 needs sglang dp {args.sglang_dp_size}"
    if args.sglang_dp_size > 1 and (
            args.colocate):
        raise ValueError(f"dp {args.sglang_enable_dp_attention}")
    assert (args.world
            % args.sglang_pp_size == 0)
    dp = args.sglang_dp_size
    assert dp > 1, "dp"


def caller(args):
    if args.sglang_pp_size:
        validate(args)
'''


def test_a_rejection_is_decided_by_its_statement_and_the_conditions_around_it(tmp_path: Path) -> None:
    source = tmp_path / "train.py"
    source.write_text(VALIDATOR)
    # an assert: its test alone, not its message
    assert deciding_spans(str(source), 2) == (((2, 11), (2, 22)),)
    # a raise: not its own arguments, the if around it (its whole condition), not the caller's
    assert deciding_spans(str(source), 5) == (((3, 7), (4, 26)),)
    # a test over several lines, from any of them
    assert deciding_spans(str(source), 7) == (((6, 12), (7, 38)),)
    # an unreadable file: the line alone
    assert deciding_spans(str(tmp_path / "gone.py"), 9) == (((9, 0), (9, 1 << 30)),)


def test_a_rejection_rests_on_the_assumed_options_read_where_it_was_decided(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(VALIDATOR)
    # where the harness saw them read: (path, line, column of the read), as repoline.repository_place says
    read_at: dict[str, set[tuple[str, int, int | None]]] = {
        "sglang_dp_size": {("train.py", 2, 44), ("train.py", 3, 7), ("train.py", 8, 9)},
        "sglang_enable_dp_attention": {("train.py", 5, 30)}, "sglang_pp_size": {("train.py", 7, 14)}}

    def rejected(line: int) -> dict[str, object]:
        return {"outcome": "rejected", "exception": "AssertionError", "path": "train.py", "line": line}

    assert rests_on(rejected(2), read_at, str(tmp_path)) == []  # read in the message only
    assert rests_on(rejected(5), read_at, str(tmp_path)) == ["sglang_dp_size"]
    assert rests_on(rejected(6), read_at, str(tmp_path)) == ["sglang_pp_size"]
    assert rests_on(rejected(9), read_at, str(tmp_path)) == []  # through a variable: not followed
    # where the column is not known, the line decides
    assert rests_on(rejected(2), {"sglang_dp_size": {("train.py", 2, None)}}, str(tmp_path)) == [
        "sglang_dp_size"]
    assert rests_on({**rejected(5), "path": "other.py"}, read_at, str(tmp_path)) == []
    assert rests_on({**rejected(5), "outcome": "accepted"}, read_at, str(tmp_path)) == []
