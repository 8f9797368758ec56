"""Who owns the code a traceback frame (or a message) points at: vLLM, a vLLM plugin or out-of-tree platform,
a library (transformers, torch, triton, flashinfer, …), Python itself, or the user's own program — and, below
Python, NCCL, the CUDA runtime, the driver, the dynamic loader, a container runtime.

The owner routes the advice: a vLLM line is answered by vLLM's releases and switches, a plugin's by its
compatibility with the installed vLLM and how to run without it, a library's by its installed version, the
user's program by its own line. Read from the frame's path (`.../site-packages/<package>/…`, a source checkout,
`csrc/…`) and, for what has no frame, from the words the lower layers print.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# vLLM loads plugins through its `vllm.general_plugins` and `vllm.platform_plugins` entry points (VLLM_PLUGINS
# selects them; vllm/plugins/__init__.py): a package named for vLLM that is not vLLM is one of those
PLUGIN_DOC = "https://docs.vllm.ai/en/latest/design/plugin_system.html"
_PLUGIN_NAME = re.compile(r"^(vllm_(?!flash_attn\b)\w+|\w+_vllm(?:_\w+)?|\w*vllm_plugin\w*)$")
# top-level packages whose owner has a name of its own (the package, then the owner the report names)
LIBRARIES: dict[str, str] = {
    "vllm": "vllm", "transformers": "transformers", "huggingface_hub": "huggingface_hub", "torch": "torch",
    "torchvision": "torch", "torchaudio": "torch", "triton": "triton", "flashinfer": "flashinfer",
    # FlashInfer's prebuilt kernels and JIT cache ship as packages of their own (flashinfer-cubin, flashinfer-jit-cache)
    "flashinfer_cubin": "flashinfer", "flashinfer_jit_cache": "flashinfer",
    "xformers": "xformers", "flash_attn": "flash-attn", "vllm_flash_attn": "flash-attn", "ray": "ray",
    "numpy": "numpy", "numba": "numba", "xgrammar": "xgrammar", "outlines": "outlines", "pydantic": "pydantic",
    "tokenizers": "tokenizers", "safetensors": "safetensors", "accelerate": "accelerate", "peft": "peft",
    "bitsandbytes": "bitsandbytes", "compressed_tensors": "compressed-tensors", "deep_gemm": "deep-gemm",
    "uvicorn": "uvicorn", "fastapi": "fastapi", "starlette": "fastapi", "zmq": "pyzmq", "msgspec": "msgspec",
    "cupy": "cupy", "nixl": "nixl", "lmcache": "plugin", "mistral_common": "mistral-common",
    "openai": "openai", "aiohttp": "aiohttp", "sentencepiece": "tokenizers", "tiktoken": "tokenizers",
    "modelscope": "modelscope", "gguf": "gguf", "llguidance": "llguidance", "cv2": "opencv", "PIL": "pillow",
    "lmformatenforcer": "lm-format-enforcer",
}
# the labels reports use
TITLES: dict[str, str] = {
    "vllm": "vLLM", "plugin": "a vLLM plugin", "python": "Python's standard library", "user-script": "your program",
    "remote-code": "the checkpoint's own code (trust_remote_code)",
    "debugger": "a debugger attached to the process",
    "torch": "PyTorch", "triton": "Triton", "flash-attn": "FlashAttention", "flashinfer": "FlashInfer", "nccl": "NCCL",
    "cuda-runtime": "the CUDA runtime", "driver": "the NVIDIA driver", "loader": "the dynamic loader",
    "container-runtime": "the container's GPU runtime", "huggingface_hub": "huggingface_hub",
}
_SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z_][\w]*)(?:/|\.py\b|\.cpython|\.abi3|\.so\b)")
_PYTHON_LIB = re.compile(r"(?:^|/)(?:usr/(?:local/)?lib|lib(?:64)?|Lib)/python3(?:\.\d+)?/"
                         r"(?!site-packages|dist-packages)|^<frozen |"
                         r"/(?:multiprocessing|asyncio|concurrent|importlib|threading)\.py|"
                         r"/(?:multiprocessing|asyncio|concurrent|importlib|json|logging|argparse|ctypes)/")


@dataclass(frozen=True)
class Owner:
    name: str  # vllm | plugin | python | user-script | a library's owner name | nccl | cuda-runtime | driver | …
    package: str  # the top-level package (the plugin's own name), or what printed the message

    @property
    def title(self) -> str:
        if self.name == "plugin":
            return f"the vLLM plugin `{self.package}`"
        if self.name == "other":
            return f"`{self.package}`, a program that runs vLLM"
        return TITLES.get(self.name, self.name)


def of_package(package: str) -> Owner:
    name = LIBRARIES.get(package)
    if name is None and _PLUGIN_NAME.match(package):
        name = "plugin"
    if name is None:
        # a compiled module named for its package (`flash_attn_2_cuda`, `vllm_C`): the longest known prefix — not a
        # package of its own that starts with another's name (`torch_npu` is Ascend's, not PyTorch's)
        pieces = package.split("_")
        for k in range(len(pieces) - 1, 0, -1):
            stem = "_".join(pieces[:k])
            if stem in LIBRARIES and _COMPILED_TAIL.match("_".join(pieces[k:])):
                return Owner(LIBRARIES[stem], stem)
    return Owner(name or package.lower().replace("_", "-"), package)


# what a compiled extension adds to its package's name: `_C`, `_2_cuda`, `_ops`, `_kernels`, `_ext`, `_lib`
_COMPILED_TAIL = re.compile(r"^(?:\d+_)?(?:C|cuda|ops|kernels?|ext|lib|cpp|cu|hip|rocm)(?:_\w+)?$|^\d+(?:_\w+)?$")


# (each path starts at a token's boundary and is bounded: a long run of `x.so` words must not backtrack)
_SO_FAILED = re.compile(r"(?<![^\s:'\"(])([^\s:'\"(]{1,300}?\.so[\w.]{0,40}): undefined symbol|"
                        r"required by ([^\s)'\"]{1,300})|"
                        r"(?:ImportError|OSError): ([^\s:'\"(]{1,300}?\.so[\w.]{0,40}):|"
                        # a logger naming the compiled module it could not import (`Failed to import vllm_ascend_C:
                        # libvllm_ascend_kernels.so: cannot open …`): that module's package
                        r"[Ff]ailed to import (?P<module>[A-Za-z_][\w.]{0,120}?)\s*:\s*\S+\.so\b")


def of_shared_object(text: str) -> Owner | None:
    """The package whose compiled module failed to load: the `.so` an undefined symbol is missing from, or the one a
    library version is required by."""
    m = _SO_FAILED.search(text[:4000])
    if m is None:
        return None
    if m["module"]:
        # the package a compiled module is named for (`vllm_ascend_C` is vllm_ascend's)
        return of_package(re.sub(r"_(?:C|ops|kernels?|ext|lib)$", "", m["module"].split(".", 1)[0]))
    path = next(g for g in m.groups() if g)
    owner = of_path(path)
    if owner is None or owner.name == "user-script":
        # a compiled module named alone (`…/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so`, its folder elided):
        # the package it is named for, when one is known by that name
        module = re.sub(r"(?:_\d+)?_(?:C|cuda|ops|kernels?|ext|lib)$", "",
                        re.split(r"[.]", path.replace("\\", "/").rsplit("/", 1)[-1], maxsplit=1)[0])
        named = of_package(module) if module else None
        if named is not None and (named.name in LIBRARIES.values() or named.name == "plugin"):  # known by name
            return named
    return owner


def of_path(path: str) -> Owner | None:
    """The owner of a frame's file: a package installed in site-packages, vLLM's C++ sources, Python's own
    library, a package run from a checkout, or the user's program; None for an empty path."""
    p = path.replace("\\", "/").strip()
    if not p:
        return None
    m = _SITE.search(p)
    if m:
        owner = of_package(m.group(1))
        if owner.name == owner.package.lower().replace("_", "-") and "/vllm/" in p[m.end() - 1:]:
            # a package no list names that holds a `vllm/` folder of its own: code written to run inside vLLM,
            # which vLLM loads as a plugin (or which patches vLLM) — `arctic_inference/vllm/model_runner.py`
            return Owner("plugin", owner.package)
        return owner
    if "/csrc/" in p or p.startswith("csrc/"):
        return Owner("vllm", "vllm")
    if _PYTHON_LIB.search(p):
        return Owner("python", "python")
    shipped = _RAY_WORKING_DIR.search(p)
    if shipped is not None:
        # the user's working directory, which Ray uploads and unpacks for its workers: their own code, not Ray's
        rest = p[shipped.end():]
        return Owner("user-script", rest or p)
    parts = [s for s in p.split("/") if s]
    if "transformers_modules" in parts[:-1]:
        # transformers' cache of a checkpoint's own code, run with trust_remote_code (`…/modules/transformers_modules/
        # <org>/<repo>/<revision>/modeling_x.py`): the model repository's code, not transformers'
        at = parts.index("transformers_modules")
        return Owner("remote-code", "/".join(parts[at + 1:min(at + 3, len(parts) - 1)]) or parts[-1])
    if "vllm_flash_attn" in parts[:-1]:
        return Owner("flash-attn", "vllm_flash_attn")  # vLLM's own build of FlashAttention, shipped inside vLLM
    checkout = _checkout(parts)
    if checkout is not None:
        return checkout
    folder_owner = _known_folder(parts)
    if folder_owner is not None:
        return folder_owner
    if _DEBUGGER.search(p):
        return Owner("debugger", "pydevd")
    if _FX_GENERATED.match(p):
        # the code torch.fx generates for a GraphModule (torch.compile's graphs run as such), not the user's file
        return Owner("torch", "torch")
    return Owner("user-script", parts[-1] if parts else p)


def _known_folder(parts: list[str]) -> Owner | None:
    """A known package's folder on the path (a source checkout, an editable install): the outermost one, since a
    package holds folders named for others (`lmcache/integration/vllm/`)."""
    for folder in parts[:-1]:
        if folder == "vllm":
            inner = max(i for i, f in enumerate(parts[:-1]) if f == "vllm")
            if _repository_script("/".join(parts[inner:])):
                return Owner("user-script", parts[-1])
            if inner and _inside_another_package(parts[inner - 1], "/".join(parts[inner:])):
                return Owner("plugin", parts[inner - 1])
        if folder in LIBRARIES or _PLUGIN_NAME.match(folder):
            return of_package(folder)
        if "._" in folder and (head := folder.split(".", 1)[0]) in LIBRARIES and head != "vllm":
            # a module path printed with dots, into a package's private modules (`torch._subclasses/fake_tensor.py`):
            # no folder a user names so
            return of_package(head)
    return None


def _checkout(parts: list[str]) -> Owner | None:
    """A repository checkout holding the package of its own name (`/verl/verl/workers/…`): that package's code, not a
    plugin's for a folder inside it named like one (`rollout/vllm_rollout/`)."""
    at = next((i for i, (a, b) in enumerate(itertools.pairwise(parts[:-1]))
               if a == b and a != "vllm" and _PACKAGE_DIR.match(a)), None)
    # (a folder or a module named for vLLM — `rollout/vllm_rollout/`, `workers/…/fsdp_vllm.py` — is the framework's code
    # that drives vLLM: a user's own project laid out like a package is still theirs without one)
    inside = parts[at + 1:-1] if at is not None else []
    # (a file named for vLLM counts two folders below the package's own, where a framework keeps its modules; a user's
    # `myproj/myproj/run_vllm.py` or `myproj/myproj/scripts/run_vllm.py` stays theirs)
    named = any(_PLUGIN_NAME.match(f) for f in inside) or (len(inside) >= 3
                                                          and _PLUGIN_NAME.match(parts[-1].removesuffix(".py")))
    if at is None or "vllm" in parts[at:-1] or not named:
        return None
    known = of_package(parts[at])
    return known if known.name in LIBRARIES.values() else Owner("other", parts[at])


# the file name torch.fx gives the forward it writes (`torch/fx/graph_module.py`: `<eval_with_key>.N`)
_FX_GENERATED = re.compile(r"^<eval_with_key>\.\d+$")


_PACKAGE_DIR = re.compile(r"^[a-z_][a-z0-9_]{1,60}$")


def _inside_another_package(parent: str, tail: str) -> bool:
    """`arctic_inference/vllm/spec_dec/arctic_speculator.py` in a checkout: a `vllm/` folder inside another Python
    package, holding a file no vLLM release has — code written to run inside vLLM (a plugin's), not vLLM's own.
    A checkout of vLLM itself (`app/vllm/engine/llm_engine.py`) holds vLLM's files: the code's history tells."""
    if parent == "vllm" or not _PACKAGE_DIR.match(parent):
        return False
    from bot.core.history import load_history  # read only for this rare shape of path

    hist = load_history()
    if hist is None or hist.has_file(tail):
        return False
    # a folder vLLM has (`vllm/v1/…`) holds a file of a release newer than those read, not another package's
    folder = tail.split("/")[:2]
    return len(folder) < 2 or "." in folder[1] or not hist.has_folder("/".join(folder) + "/")


# the folders of vLLM's repository beside its package: scripts a user runs from a checkout (`benchmarks/
# benchmark_serving.py`, `examples/…`), not code of the package the server imports
_REPO_SCRIPTS = ("benchmarks", "examples", "tests", "tools", "scripts")


def _repository_script(tail: str) -> bool:
    """`vllm/benchmarks/benchmark_serving.py` in a checkout named vllm: a script of the repository, when no release
    of the package has that file (the package has its own `vllm/benchmarks/` since 0.8.5: `serve.py` is vLLM's)."""
    folder = tail.split("/")
    if len(folder) < 3 or folder[1] not in _REPO_SCRIPTS:
        return False
    from bot.core.history import load_history

    hist = load_history()
    return hist is not None and not hist.has_file(tail)


# the C++ namespaces a native stack shows (py-spy --native) that name a package: PyTorch's ATen, c10 and c10d, and each
# package's own (`flashinfer::sampling::…`, `vllm::…` from csrc)
_NAMESPACES = {"at": "torch", "c10": "torch", "c10d": "torch", **{p: p for p in LIBRARIES}}


def native_file(symbol: str, lib: str) -> str | None:
    """A dump frame's file, for its owner: a Python file as printed; a native frame as `<package>/<library>` when
    its C++ namespace or its library's folder names a package; None when neither does (the driver's and the CUDA
    runtime's frames, bare addresses): such a frame says where, not whose."""
    if lib.endswith((".py", ".pyx")):
        return lib
    namespace = symbol.split("::", 1)[0] if "::" in symbol else ""
    package = _NAMESPACES.get(namespace)
    folder = lib.split("/", 1)[0] if "/" in lib else ""
    if package is None and folder in LIBRARIES:
        package = folder
    return f"{package}/{lib.rsplit('/', 1)[-1]}" if package else None


# Ray's runtime environment unpacks the user's working_dir under the session's folder
# (`/tmp/ray/session_…/runtime_resources/working_dir_files/_ray_pkg_<hash>/…`;
# https://docs.ray.io/en/latest/ray-core/handling-dependencies.html): a folder named `ray` on that path is not Ray's
_RAY_WORKING_DIR = re.compile(r"/runtime_resources/working_dir_files/_ray_pkg_[0-9a-f]{1,64}/")


# an IDE's debugger (pydevd, under debugpy and the IDEs' Python plugins) hooks every frame the process runs: its
# frames are neither the user's program nor vLLM's
_DEBUGGER = re.compile(r"(?:^|[/\\])_?pydevd\w*|(?:^|/)debugpy/")
