"""stubs in a real Python process: what repository code may do with modules the sandbox lacks."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from probes import run_probe_program

HARNESS = Path(__file__).resolve().parents[1] / "app" / "sandbox" / "harness"


def run_repo_module(tmp_path: Path, module_source: str, policy: dict[str, Any] | None = None,
                    extra: dict[str, str] | None = None) -> Any:
    """Import `pkg.mod` (the given source) from a repository after stubs.install; its RESULT, as JSON."""
    repo = tmp_path / "repo"
    files = {"pkg/__init__.py": "", "pkg/mod.py": textwrap.dedent(module_source), **(extra or {})}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    outside = tmp_path / "site"  # third-party code: not under the repository root
    outside.mkdir(exist_ok=True)
    (outside / "thirdparty.py").write_text(textwrap.dedent("""
        try:
            import flash_attn_missing
            HAVE_FLASH = True
        except ImportError:
            HAVE_FLASH = False
    """))
    probe = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(HARNESS)!r}, {str(repo)!r}, {str(outside)!r}]
        import stubs
        try:
            stubs.install({str(repo)!r}, json.loads({json.dumps(with_torch_stubbed(policy))!r}))
        except stubs.MissingRealPackage as exc:
            print(json.dumps({{"missing": str(exc)}}))
            raise SystemExit(0)
        import pkg.mod
        print(json.dumps(pkg.mod.RESULT))
    """)
    return run_probe_program(tmp_path, probe)


def with_torch_stubbed(policy: dict[str, Any] | None) -> dict[str, Any]:
    """torch is these tests' absent module; a machine that has CPU torch installed (for real repositories'
    validation) stubs it all the same."""
    policy = dict(policy or {})
    policy["stub_modules"] = ["torch", *policy.get("stub_modules", [])]
    return policy


def test_repository_classes_subclass_decorate_and_hint_with_stubs(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import abc
        from typing import Optional
        import torch

        class Model(torch.nn.Module, abc.ABC):
            def __init__(self, width: int, device: Optional[torch.device] = None) -> None:
                super().__init__()
                self.width = width

        @torch.no_grad()
        def called_decorator() -> int:
            return 1

        @torch.jit.script
        def bare_decorator(x: torch.Tensor | None) -> int:
            return 2

        @torch.compile(mode="max-autotune")
        class Decorated:
            answer = 3

        model = Model(7)
        RESULT = [model.width, called_decorator(), bare_decorator(None), Decorated.answer,
                  isinstance(model, torch.nn.Module), isinstance(3, torch.Tensor),
                  issubclass(Model, torch.nn.Module), torch.nn.Module is torch.nn.Module]
    """)
    assert result == [7, 1, 2, 3, True, False, True, True]


def test_stub_values_survive_arithmetic_comparison_iteration_and_with(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import torch

        count = torch.cuda.device_count()
        world = count * 2 + 1
        with torch.no_grad():
            inside = True
        with torch.cuda.stream:
            pass
        RESULT = [bool(torch.cuda.is_available()), world is count, count == count, count == 0, count > 1,
                  list(torch.cuda.devices()), len(count), int(count), f"{count:.2f}".startswith("<stub"),
                  inside, list(torch.cuda.stream)]
    """)
    assert result == [False, True, True, False, False, [], 0, 0, True, True, []]


def test_a_stubbed_attribute_of_an_instance_computes_at_import(tmp_path: Path) -> None:
    # slime and miles before 2026-01 (slime/utils/fp8_kernel.py, imported by validation): with torch absent,
    # `-torch.finfo(...).max` at module top failed "bad operand type for unary -: 'StubMeta'" on every suite
    result = run_repo_module(tmp_path, """
        import torch

        FP8_MAX = torch.finfo(torch.float8_e4m3fn).max
        FP8_MIN = -FP8_MAX
        scaled = [abs(FP8_MAX), +FP8_MAX, ~FP8_MAX, FP8_MAX * 2, 1 / FP8_MAX, FP8_MAX - 1, FP8_MAX ** 2]
        hint = torch.Tensor | None
        RESULT = [FP8_MIN is FP8_MAX, all(v is FP8_MAX for v in scaled), repr(hint).count("|"),
                  FP8_MIN < 0]
    """)
    assert result == [True, True, 1, False]


def test_a_pydantic_field_typed_with_an_absent_packages_class_takes_any_value(tmp_path: Path) -> None:
    # PrimeIntellect-ai/prime-rl: its pydantic configs type fields with `verifiers` classes (a git submodule
    # in CI, absent here); a real pydantic refused the stub type ("Unable to generate pydantic-core schema"),
    # and every test module importing the configs did not import
    result = run_repo_module(tmp_path, """
        import pydantic
        from verifiers.v1 import EnvConfig

        class Orchestrator(pydantic.BaseModel):
            env: EnvConfig | None = None
            envs: list[EnvConfig] = []
            batch: int = 8

        built = Orchestrator(env={"id": "reverse-text"}, envs=[{"id": "a"}, "b"])
        try:
            Orchestrator(batch="many")
            refused = False
        except pydantic.ValidationError:
            refused = True
        RESULT = [built.env, built.envs, built.batch, refused]
    """, {"stub_modules": ["verifiers"]})
    assert result == [{"id": "reverse-text"}, [{"id": "a"}, "b"], 8, True]


def test_a_stubbed_constant_used_as_a_path_or_a_number(tmp_path: Path) -> None:
    # RLinf-shaped: `Path(huggingface_hub.constants.HF_HOME) / "lerobot"` at import, huggingface_hub absent
    result = run_repo_module(tmp_path, """
        import os
        from pathlib import Path
        from huggingface_hub.constants import HF_HOME
        import torch

        home = Path(HF_HOME) / "lerobot"
        RESULT = [str(home), os.path.join(torch.cuda.device_count(), "x"), home.exists(),
                  int(torch.cuda.NUM_BINS), float(torch.cuda.NUM_BINS)]
    """)
    assert result == ["/tmp/.prtriage-stub-paths/huggingface_hub.constants.HF_HOME/lerobot",
                      "/tmp/.prtriage-stub-paths/torch.cuda.device_count/x", False, 0, 0.0]


def test_submodules_of_stubs_are_stubs(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import torch.distributed as dist
        from megatron.core import mpu
        from megatron.training.arguments import parse_args
        import megatron.training
        import sys
        from importlib import import_module

        lazily = import_module("sglang.srt.server_args")
        RESULT = [dist.__name__, mpu.__qualname__, parse_args.__module__, megatron.training.__name__,
                  sys.modules["megatron"].__prtriage_stub__, lazily.__name__, dist.__prtriage_stub__]
    """)
    assert result == ["torch.distributed", "mpu", "megatron.training.arguments", "megatron.training",
                      True, "sglang.srt.server_args", True]


def test_only_repository_imports_are_stubbed(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import thirdparty
        import flash_attn_missing

        RESULT = [thirdparty.HAVE_FLASH, flash_attn_missing.__prtriage_stub__]
    """)
    assert result == [False, True]


def test_missing_submodule_of_a_real_package_still_fails(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        try:
            import json.no_such_part
            RESULT = "stubbed"
        except ImportError:
            RESULT = "import error"
    """)
    assert result == "import error"


def test_versions_and_attributes_come_from_the_policy(tmp_path: Path) -> None:
    policy = {"stub_attributes": {"torch.__version__": "2.5.0", "torch.cuda.is_available()": True,
                                  "torch.distributed.get_world_size()": 8, "sglang.srt.PORTS": [1, 2]}}
    result = run_repo_module(tmp_path, """
        import torch
        import torch.distributed as dist
        import sglang.srt
        import megatron

        RESULT = [torch.__version__, megatron.__version__, torch.cuda.is_available(),
                  dist.get_world_size() * 2, sglang.srt.PORTS]
    """, policy)
    assert result == ["2.5.0", "0.0.0", True, 16, [1, 2]]


def test_policy_stub_modules_are_stubbed_even_when_installed(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import yaml
        import json

        RESULT = [getattr(yaml, "__prtriage_stub__", False), hasattr(json, "__prtriage_stub__")]
    """, {"stub_modules": ["yaml"]})
    assert result == [True, False]


def test_real_packages_are_never_stubbed(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        import yaml

        RESULT = [yaml.safe_load("a: 1"), hasattr(yaml, "__prtriage_stub__")]
    """, {"real_packages": ["yaml"], "stub_modules": ["yaml"]})
    assert result == [{"a": 1}, False]


def test_a_missing_real_package_is_a_clear_error(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, "RESULT = 1\n", {"real_packages": ["typer_not_installed_here"]})
    assert "typer_not_installed_here" in result["missing"]
    assert "harness.real_packages" in result["missing"]


def test_stubbing_can_be_switched_off(tmp_path: Path) -> None:
    result = run_repo_module(tmp_path, """
        try:
            import megatron
            RESULT = "stubbed"
        except ImportError:
            RESULT = "import error"
    """, {"stub_missing_modules": False})
    assert result == "import error"


def test_registries_of_stubbed_libraries_absorb_any_registration(tmp_path: Path) -> None:
    # radixark/miles: miles/utils/hf_config.py, before AutoConfig.from_pretrained:
    #   AutoConfig.register(alias.model_type, compat_config, exist_ok=alias.override_hf_native)
    #   auto_cls.register(compat_config, compat_model_cls, exist_ok=alias.override_hf_native)
    # ABCMeta.register(subclass) raised TypeError on these arguments.
    result = run_repo_module(tmp_path, """
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
        from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config

        Compat = type("DeepseekV32Config", (DeepseekV3Config,), {"model_type": "deepseek_v32"})
        base_model = AutoModelForCausalLM._model_mapping[DeepseekV3Config]
        Model = type(base_model.__name__, (base_model,), {"config_class": Compat})

        class Backend(torch.nn.Module):  # a repository class deriving from a stub: an ABC of its own
            pass

        class Other:
            pass

        Backend.register(Other)
        RESULT = {
            "config": AutoConfig.register("deepseek_v32", Compat, exist_ok=True) is Compat,
            "model": AutoModelForCausalLM.register(Compat, Model, exist_ok=True) is Model,
            "name_only": AutoConfig.register("deepseek_v32"),
            "keyword_only": AutoConfig.register(model_type="x", config=Compat),
            "virtual_subclass": issubclass(Other, Backend),
        }
    """)
    assert result == {"config": True, "model": True, "name_only": None, "keyword_only": None,
                      "virtual_subclass": True}


def test_a_stub_base_mixes_with_a_protocol_base_as_the_real_class_would(tmp_path: Path) -> None:
    # pytorch/torchtitan from 2026-02 to 2026-08 (torchtitan/components/dataloader.py, every suite blind):
    # `class ParallelAwareDataloader(StatefulDataLoader, BaseDataLoader)`, the first from the absent
    # torchdata, the second deriving from torch's runtime-checkable `Stateful` Protocol: StubMeta and typing's
    # _ProtocolMeta, neither a subclass of the other, were a metaclass conflict at import.
    result = run_repo_module(tmp_path, """
        import abc
        from typing import Protocol, runtime_checkable
        from torchdata_missing.stateful_dataloader import StatefulDataLoader

        @runtime_checkable
        class Stateful(Protocol):
            def state_dict(self) -> dict: ...

        class BaseDataLoader(Stateful, abc.ABC):
            @abc.abstractmethod
            def __iter__(self): ...

        class ParallelAwareDataloader(StatefulDataLoader, BaseDataLoader):
            def __init__(self, rank: int) -> None:
                self.rank = rank

            def __iter__(self):
                return iter(())

            def state_dict(self) -> dict:
                return {"rank": self.rank}

        try:
            class Unrelated(int, str):  # a conflict of the repository's own: Python's error, as without stubs
                pass
            own = "built"
        except TypeError as exc:
            own = type(exc).__name__
        loader = ParallelAwareDataloader(3)
        RESULT = [loader.state_dict(), isinstance(loader, Stateful),
                  isinstance(loader, StatefulDataLoader), own]
    """)
    assert result == [{"rank": 3}, True, True, "TypeError"]


def test_a_star_import_of_a_stub_gives_the_names_the_importer_reads(tmp_path: Path) -> None:
    # volcengine/verl from 2025-09-26 to 2025-10-21 (verl/models/mcore/qwen2_5_vl/attention.py, reached by
    # the validation entry's import): `from megatron.core.transformer.attention import *` took nothing from
    # the stubbed megatron, and `class Qwen2_5VLSelfAttention(SelfAttention)` failed with "NameError: name
    # 'SelfAttention' is not defined" on every suite.
    result = run_repo_module(tmp_path, """
        import torch
        Tensor = "mine"
        from json import *
        from megatron.core.transformer.attention import *
        import megatron.core.transformer.attention as attention

        class Qwen2_5VLSelfAttention(SelfAttention):
            local = 1
            def forward(self, hidden: Tensor, mask: Optional[Tensor] = None) -> int:
                return len(apply_rotary_pos_emb(hidden)) + local_count

        def later():
            global local_count
            local_count = 0
            return Qwen2_5VLSelfAttention().forward(None)

        RESULT = {
            "base": SelfAttention is attention.SelfAttention,
            "in_a_function": later(),
            "bound_before_kept": Tensor,
            "real_star_import_kept": dumps is __import__("json").dumps,
            "builtin_kept": len is __builtins__["len"] if isinstance(__builtins__, dict) else len is
                            __builtins__.len,
            "class_body_name_not_given": "local" in globals(),
            "not_an_all_otherwise": hasattr(attention, "__all__"),
        }
    """)
    assert result == {"base": True, "in_a_function": 0, "bound_before_kept": "mine",
                      "real_star_import_kept": True, "builtin_kept": True, "class_body_name_not_given": False,
                      "not_an_all_otherwise": False}
