"""The neutral value of an option by its name's shape: what an upstream parser most likely defaults it to.

One rule for two users: `prtriage init` writes it into a starter policy's `validation.attribute_defaults`
(app/analysis/starter), and the harness assumes it, inside the sandbox, for an attribute no parser defined in
a run where a stubbed or replaced upstream parser parsed (tolerant.py). Standard library alone: the harness
imports nothing of the app.
"""

from __future__ import annotations

import re
from typing import Any

SIZE = re.compile(r"(?:_size|_num|_count|_degree)$|^num_")
# A switch word opens the name (`use_lora`, `bf16`) or a later part of it (`sglang_enable_dp_attention`,
# `moe_use_legacy_grouped_gemm`: an upstream parser's options under its prefix), or the name ends in a state
# (`dp_attention_enabled`). `is`/`has`/`overlap`/`fp16` only open it: inside a name they rarely mean a switch.
SWITCH = re.compile(r"^(?:use|enable|disable|no|skip|overlap|untie|fp\d+|bf16|is|has)(?:_|$)"
                    r"|_(?:use|enable|disable|no|skip)_|_(?:enabled|disabled)$")


def neutral_default(name: str) -> Any:
    """1 for a size (`sglang_data_parallel_size`, `num_layers`), False for a switch (`use_lora`), else None:
    a parallelism of one and a feature left off are what a CI launch that does not pass the option gets."""
    return 1 if SIZE.search(name) else False if SWITCH.search(name) else None
