"""Training boundaries: the first call that needs what CI has and the sandbox has not ends the run there.

Runs INSIDE the sandbox next to the repository's code: imports nothing of `app`, only the standard library
and a sibling harness module.
A CI launch's own entry point, run in the sandbox, parses and validates its configuration and then starts
training: a process group, a device, a Ray cluster, weights, a dataset, a server. None of that exists here,
and all of it comes after validation. So each such call raises `TrainingBoundary` (a BaseException: the
script's own `except Exception` does not swallow it), and reaching one means the launch got through
everything CI would have rejected it for. The calls are patched right after their module is imported (an
import hook), so a real package and a stub stop at the same place; sockets and launched servers are
stopped by an audit hook. Outside a suite's run (`armed`), the harness itself is never stopped.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import inspect
import os
import re
import shlex
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # inside the sandbox the harness directory is on sys.path, siblings are top-level modules
    from app.sandbox.harness import repoline
else:
    import repoline

CallCheck = Callable[[tuple[Any, ...], dict[str, Any]], bool]
PROCESS_GROUP = "a process group needs the other ranks CI starts"
DEVICE = "device work needs the GPUs CI has"
CLUSTER = "a Ray cluster or actor needs the nodes CI starts"
WEIGHTS = "model weights are on CI's hosts"
DATASET = "datasets are downloaded or mounted on CI's hosts"
LAUNCHER = re.compile(r"^(python[0-9.]*|torchrun|deepspeed|accelerate|ray|mpirun|srun|sglang|vllm)$")


class TrainingBoundary(BaseException):
    """The run reached a call that needs CI's hardware or services: validation is behind it."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name, self.why = name, why


def _names_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """`.to("cuda")`, `.to(torch.device("cuda:1"))`, `.to(0)`, `.to(device="cuda")`: device work."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, str) and value.startswith("cuda"):
            return True
        if type(value).__name__ == "device" and getattr(value, "type", None) == "cuda":
            return True
        if isinstance(value, int) and not isinstance(value, bool):
            return True  # a device index
    return False


@dataclass(frozen=True)
class Boundary:
    """`module.attribute` (dotted inside the module: `Tensor.cuda`) stops the run, for `why`; with `when`,
    only the calls it accepts do, and the others call through."""

    module: str
    attribute: str
    why: str
    when: CallCheck | None = None
    stand_in: Callable[[Boundary], Any] | None = None  # what replaces it, when calling it is no boundary
    # a query CI's hosts answer otherwise than the sandbox: the repository's own calls get this answer
    answer: Any = None

    @property
    def name(self) -> str:
        return f"{self.module}.{self.attribute}"


_AUTO_MODELS = ("AutoModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForVision2Seq",
                "AutoModelForImageTextToText", "AutoModelForSequenceClassification",
                "AutoModelForTokenClassification", "PreTrainedModel")

BOUNDARIES: tuple[Boundary, ...] = (
    Boundary("torch.distributed", "init_process_group", PROCESS_GROUP),
    Boundary("torch.distributed.device_mesh", "init_device_mesh", PROCESS_GROUP),
    Boundary("torch.multiprocessing", "spawn", "it starts one worker process per device"),
    # a Process's start, and so a Manager's or a Pool's (Megatron's asynchronous checkpoint writer starts
    # `mp.get_context("spawn").Manager()` after validation): the sandbox has no room for the workers
    Boundary("multiprocessing.process", "BaseProcess.start", "it starts worker processes"),
    # _lazy_init is where CPU torch refuses any CUDA work (tensors made on "cuda", streams, kernels)
    Boundary("torch.cuda", "_lazy_init", DEVICE),
    Boundary("torch.cuda", "set_device", DEVICE),
    Boundary("torch.cuda", "current_device", DEVICE),
    Boundary("torch.cuda", "synchronize", DEVICE),
    Boundary("torch.cuda", "mem_get_info", DEVICE),
    Boundary("torch.cuda", "get_device_properties", DEVICE),
    Boundary("torch", "Tensor.cuda", DEVICE),
    Boundary("torch", "Tensor.to", DEVICE, _names_cuda),
    Boundary("torch.nn", "Module.cuda", DEVICE),
    Boundary("torch.nn", "Module.to", DEVICE, _names_cuda),
    Boundary("ray", "init", CLUSTER),
    # what a launch asks a cluster it expects to join (`while len(ray.nodes()) < n`): a stub's answer is
    # empty and the poll never ends, a real Ray's needs the cluster
    Boundary("ray", "nodes", CLUSTER),
    Boundary("ray", "cluster_resources", CLUSTER),
    Boundary("ray", "available_resources", CLUSTER),
    Boundary("ray", "get_actor", CLUSTER),
    Boundary("ray", "get", CLUSTER),
    Boundary("ray", "remote", CLUSTER, stand_in=lambda boundary: _ray_remote(boundary)),
    Boundary("ray.util", "placement_group", CLUSTER),
    Boundary("ray.util.placement_group", "placement_group", CLUSTER),
    Boundary("deepspeed", "initialize", PROCESS_GROUP),
    Boundary("deepspeed", "init_distributed", PROCESS_GROUP),
    Boundary("accelerate", "Accelerator", "an Accelerator joins the process group CI starts"),
    *(Boundary("transformers", f"{model}.from_pretrained", WEIGHTS) for model in _AUTO_MODELS),
    # an inference engine loads its model's weights onto CI's GPUs as it is built
    Boundary("vllm", "LLM", WEIGHTS),
    Boundary("safetensors", "safe_open", WEIGHTS),
    Boundary("safetensors.torch", "load_file", WEIGHTS),
    Boundary("datasets", "load_dataset", DATASET),
)
COMPILERS = "compiled code never runs before training: the function stays as written"
GPUS = "CI's hosts have the GPUs the launch runs on"
FILES = "the file is on CI's hosts (a dataset, tokenizer, weights or checkpoint CI mounts)"
SCRATCH = "/tmp/"  # the sandbox's own scratch: what the launch wrote there is its own

# What CI's hosts answer: a launch that checks for a GPU before it parses (`assert
# torch.cuda.is_available(), "Megatron requires CUDA."`) goes on to its validation, as on CI; the device work
# that follows is a boundary above. Only calls made from the repository's own code get it: torch asking
# itself (autocast, RNG forks) would go on to device work that is none of the launch's.
CI_ANSWERS: tuple[Boundary, ...] = (
    Boundary("torch.cuda", "is_available", GPUS, answer=True),
)


def _identity(boundary: Boundary) -> Callable[..., Any]:
    """`@decorator` and `@decorator(...)` leave the function (or class, or module) as it is."""

    def decorator(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return lambda function: function

    decorator.__prtriage_boundary__ = True  # type: ignore[attr-defined]
    return decorator


# Where torch is real, its compilers applied at import are identity decorators: TorchScript compiles each
# function at import (seconds, and it fails on code CI never scripts on a CPU), torch.compile's own import
# costs seconds; what they compile runs in training, after the boundary.
IDENTITY_DECORATORS: tuple[Boundary, ...] = (
    Boundary("torch.jit", "script", COMPILERS, stand_in=_identity),
    Boundary("torch.jit", "ignore", COMPILERS, stand_in=_identity),
    Boundary("torch", "compile", COMPILERS, stand_in=_identity),
)
STUB_MARK = "__prtriage_stub__"  # stubs.STUB_MARK: a stub class is made on demand, never constructed
SOCKET = "a server or a peer is on CI's network"
SERVER = "it launches a server or training processes"

_by_module: dict[str, list[Boundary]] = {}
_armed = False
_reached: list[tuple[TrainingBoundary, tuple[str | None, int | None]]] = []
_repo_prefix = ""


def install(repo: str,
            boundaries: Sequence[Boundary] = (*BOUNDARIES, *IDENTITY_DECORATORS, *CI_ANSWERS)) -> None:
    """Patch the boundaries of modules imported already, and of every module imported from now on."""
    global _repo_prefix
    _repo_prefix = os.path.abspath(repo).rstrip("/") + "/"
    _by_module.clear()
    for boundary in boundaries:
        _by_module.setdefault(boundary.module, []).append(boundary)
    for module_name in list(_by_module):
        module = sys.modules.get(module_name)
        if module is not None:
            _patch(module)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PatchAfterImport)]
    sys.meta_path.insert(0, _PatchAfterImport())
    sys.addaudithook(_audit)


@contextlib.contextmanager
def armed() -> Iterator[None]:
    """Boundaries stop the run only inside this block (a suite's run of repository code)."""
    global _armed
    _reached.clear()
    _armed = True
    try:
        yield
    finally:
        _armed = False


def reached() -> tuple[TrainingBoundary, tuple[str | None, int | None]] | None:
    """The first boundary the last armed run reached, and the repository line that called it."""
    return _reached[0] if _reached else None


def cross(name: str, why: str) -> TrainingBoundary:
    """The exception to raise at boundary `name`, noted as reached (the repository may catch it)."""
    stop = TrainingBoundary(name, why)
    _reached.append((stop, repoline.repository_line(sys._getframe(1), _repo_prefix)))
    return stop


def missing_file(path: str) -> None:
    """Reading an absolute PATH that is neither in the tree nor in the scratch /tmp, and does not exist: CI's
    hosts have it (Megatron's `--vocab-file /mnt/artifacts/...`, read when the tokenizer is built after
    validation). A path in the tree stays the launch's own error: a head may have removed the file."""
    if _armed and os.path.isabs(path) and _on_ci_host(path):
        raise cross("open", FILES)


ABSOLUTE_PATH = re.compile(r"(?<![\w.])/[^\s'\"`,;()\[\]{}]+")


def ci_file_named(failure: BaseException, given: Sequence[str]) -> str | None:
    """The absent file on CI's hosts that FAILURE's message names, when the suite's own argv or environment
    (GIVEN) named it or a directory above it: a launch checking before it reads (`if not
    os.path.exists(tokenizer_path): raise ValueError(f"tokenizer_path: {tokenizer_path} is invalid")`) fails
    where CI, which mounts the file, goes on to training, as `missing_file` says for a launch that reads."""
    roots = [word.rstrip("/") for value in given for word in re.split(r"[\s=,]+", value)
             if os.path.isabs(word) and _on_ci_host(word)]
    for path in ABSOLUTE_PATH.findall(str(failure)):
        path = path.rstrip(".")
        if _on_ci_host(path) and not os.path.exists(path) \
                and any(path == root or path.startswith(f"{root}/") for root in roots if root):
            return path
    return None


def _on_ci_host(path: str) -> bool:
    return not path.startswith((_repo_prefix, SCRATCH))


def note_reached(name: str, why: str, where: tuple[str | None, int | None]) -> None:
    """A boundary the run reached without a call to stop at (an error naming a file on CI's hosts)."""
    _reached.append((TrainingBoundary(name, why), where))


def _patch(module: types.ModuleType) -> None:
    if getattr(module, STUB_MARK, False) is True:
        _import_stubbed_submodules(module.__name__)
    for boundary in _by_module.get(module.__name__, ()):
        *parents, attribute = boundary.attribute.split(".")
        owner: Any = module
        try:
            for parent in parents:
                owner = getattr(owner, parent)
            # the descriptor as the class holds it (a classmethod stays one); a stub's made on demand
            original = inspect.getattr_static(owner, attribute, None)
            if original is None:
                original = getattr(owner, attribute, None)
            setattr(owner, attribute, _stop_at(boundary, owner, original))
        except (AttributeError, TypeError):
            continue  # a version of the package without it: nothing to stop there


def _import_stubbed_submodules(name: str) -> None:
    """A stub answers `torch.cuda` with a stub class, never importing `torch.cuda`: its boundaries would
    never be patched. So the stub submodules that have boundaries are imported (and patched) with it."""
    for module_name in sorted(_by_module):
        if module_name.startswith(f"{name}.") and "." not in module_name[len(name) + 1:] \
                and module_name not in sys.modules:
            with contextlib.suppress(ImportError):
                importlib.import_module(module_name)


def _stop_at(boundary: Boundary, owner: Any, original: Any) -> Any:
    if getattr(original, "__prtriage_boundary__", False):
        return original
    if boundary.stand_in is not None:
        return boundary.stand_in(boundary)
    if boundary.answer is not None:
        return _answering(boundary, original)
    if isinstance(original, type) and original.__dict__.get(STUB_MARK) is not True:
        return _stopping_class(boundary, original)

    def stop(*args: Any, **kwargs: Any) -> Any:
        if _armed and (boundary.when is None or boundary.when(args, kwargs)):
            raise cross(boundary.name, boundary.why)
        if original is None:
            raise AttributeError(boundary.name)
        return _call_original(original, owner, args, kwargs)

    stop.__name__ = stop.__qualname__ = boundary.attribute.rpartition(".")[2]
    stop.__prtriage_boundary__ = True  # type: ignore[attr-defined]
    if isinstance(original, staticmethod | classmethod) or (isinstance(owner, type)
                                                            and isinstance(original, type)):
        return staticmethod(stop)  # called on the class, as the original was: no instance to bind
    return stop


def _answering(boundary: Boundary, original: Any) -> Any:
    """ORIGINAL, except that the repository's own calls during a suite's run get CI's answer."""

    def query(*args: Any, **kwargs: Any) -> Any:
        if _armed and _repo_prefix and sys._getframe(1).f_code.co_filename.startswith(_repo_prefix):
            return boundary.answer
        if original is None:
            raise AttributeError(boundary.name)
        return original(*args, **kwargs)

    query.__name__ = query.__qualname__ = boundary.attribute
    query.__prtriage_boundary__ = True  # type: ignore[attr-defined]
    return query


def _call_original(original: Any, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(original, staticmethod):
        return original.__func__(*args, **kwargs)
    if isinstance(original, classmethod):
        return original.__func__(owner, *args, **kwargs)
    return original(*args, **kwargs)


def _stopping_class(boundary: Boundary, original: type) -> type:
    """The class itself, its construction the boundary (`Accelerator()`): subclasses still derive from it
    and isinstance checks still recognise it."""
    previous: Any = original.__new__

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        if _armed:
            raise cross(boundary.name, boundary.why)
        # object.__new__ takes no arguments beyond the class; any other __new__ takes the call's
        return previous(cls) if previous is object.__new__ else previous(cls, *args, **kwargs)

    original.__new__ = staticmethod(__new__)  # type: ignore[assignment]
    original.__prtriage_boundary__ = True  # type: ignore[attr-defined]
    return original


def _ray_remote(boundary: Boundary) -> Callable[..., Any]:
    """`@ray.remote` and `@ray.remote(num_gpus=1)` decorate at import, which is no boundary; creating the
    actor or starting the task (`Actor.remote()`, `Actor.options(...).remote()`) is."""

    def remote(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return _RemoteHandle(args[0], boundary)
        return lambda target: _RemoteHandle(target, boundary)

    remote.__prtriage_boundary__ = True  # type: ignore[attr-defined]
    return remote


class _RemoteHandle:
    """A decorated actor class or task: its own attributes stay readable, `.remote()` is the boundary."""

    def __init__(self, target: Any, boundary: Boundary) -> None:
        self._target, self._boundary = target, boundary

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        if _armed:
            raise cross(self._boundary.name, self._boundary.why)
        return None

    def options(self, *args: Any, **kwargs: Any) -> _RemoteHandle:
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class _Patching(importlib.abc.Loader):
    """The module's own loader, then the module's boundaries patched before anyone imports from it."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)  # get_source, get_resource_reader ... of the real loader


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """First on the meta path: finds a boundary module through the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _by_module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Patching(spec.loader)
                return spec
        return None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Sockets that connect or listen, and launched servers or training processes, are boundaries."""
    if not _armed:
        return
    if event in ("socket.connect", "socket.bind"):
        raise cross(event, SOCKET)
    if event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn") \
            and _launches_more_of_the_program(event, args):
        raise cross(event, SERVER)


def _launches_more_of_the_program(event: str, args: tuple[Any, ...]) -> bool:
    """A Python interpreter, torchrun, ray ... (a server or the training processes), not a tool (git)."""
    words: list[str] = []
    for value in args:
        if isinstance(value, str | bytes | os.PathLike):
            text = os.fsdecode(value)
            words += _split(text) if event == "os.system" else [text]
        elif isinstance(value, list | tuple):
            words += [os.fsdecode(w) for w in value if isinstance(w, str | bytes | os.PathLike)]
    return any(LAUNCHER.match(os.path.basename(word)) for word in words)


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
