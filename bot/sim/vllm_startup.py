"""What a starting vLLM prints, phase by phase (weights, drafter, torch.compile, KV cache, CUDA graphs), with
the waits between, and its engine config line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from bot.sim.vllm_log import Log
from bot.sim.vllm_serve_args import ServeArgs, SpecConfig
from bot.sim.vllm_settings import Version

# The shares of SPECOPS_SIM_STARTUP_SECONDS each phase takes; its lines are the real forms (quoted with
# where they were seen in tests/core/test_startup_phases.py). --enforce-eager skips torch.compile and CUDA
# graphs, ngram has no drafter to load; what is skipped is not waited for.
STARTUP_SHARES = {"start": 0.05, "weights": 0.3, "drafter": 0.1, "compile": 0.25, "kv_cache": 0.1,
                  "cudagraph": 0.15, "api": 0.05}


def startup_phases(args: ServeArgs, spec: SpecConfig | None) -> dict[str, float]:
    """Each phase's share of the startup time, those that do not happen left out, the rest scaled up."""
    skipped = set()
    if args.enforce_eager:
        skipped |= {"compile", "cudagraph"}
    if spec is None or spec.method == "ngram":
        skipped.add("drafter")
    kept = {k: v for k, v in STARTUP_SHARES.items() if k not in skipped}
    total = sum(kept.values())
    return {k: v / total for k, v in kept.items()}


class StartupLog:
    """What a starting vLLM prints while it loads, compiles and sizes its cache, with the waits between;
    a stop (SIGTERM) during the start ends it at once."""

    def __init__(self, log: Log, stop: threading.Event, seconds: float, v: Version) -> None:
        self.log, self.stop, self.seconds, self.v = log, stop, seconds, v
        self.loaded = 0.0  # seconds spent loading weights so far: "Model loading took" counts the drafter's too

    def wait(self, share: float) -> bool:
        """False when the server was told to stop meanwhile."""
        return not self.stop.wait(self.seconds * share)

    def engine(self, where: str, message: str) -> None:
        self.log.info(where, message, proc="EngineCore_DP0")

    def run(self, args: ServeArgs, spec: SpecConfig | None) -> bool:
        """Every phase in order; False when told to stop before the end."""
        shares = startup_phases(args, spec)
        steps: dict[str, Callable[[float], bool]] = {
            "start": self.wait, "weights": lambda share: self.weights(args, share, shares), "drafter": self.drafter,
            "compile": self.compile, "kv_cache": lambda share: self.kv_cache(args, share),
            "cudagraph": self.cudagraph, "api": self.api}
        return all(steps[key](share) for key, share in shares.items())

    def weights(self, args: ServeArgs, share: float, shares: dict[str, float]) -> bool:
        took = self.seconds * share
        self.engine("gpu_model_runner.py:1", f"Starting to load model {args.model}...")
        if not self.wait(share * 0.9):
            return False
        self.log.emit(f"Loading safetensors checkpoint shards: 100% Completed | 11/11 [00:{int(took):02d}<00:00, "
                      f"{11 / max(took, 1e-3):.2f}it/s]")
        if not self.wait(share * 0.1):
            return False
        self.engine("default_loader.py:1", f"Loading weights took {took:.2f} seconds")
        self.loaded = took
        if "drafter" not in shares:
            self.engine("gpu_model_runner.py:1", f"Model loading took 51.24 GiB memory and {took:.6f} seconds")
        return True

    def drafter(self, share: float) -> bool:
        self.engine("gpu_model_runner.py:1", "Loading drafter model...")
        if not self.wait(share):
            return False
        took = self.seconds * share
        self.engine("default_loader.py:1", f"Loading weights took {took:.2f} seconds")
        self.engine("gpu_model_runner.py:1",
                    f"Model loading took 52.87 GiB memory and {self.loaded + took:.6f} seconds")
        return True

    def compile(self, share: float) -> bool:
        took = self.seconds * share
        self.engine("backends.py:1", "Using cache directory: /root/.cache/vllm/torch_compile_cache/5c1b2270cd/"
                                     "rank_0_0/backbone for vLLM's torch.compile")
        if not self.wait(share * 0.3):
            return False
        self.engine("backends.py:1", f"Dynamo bytecode transform time: {took * 0.3:.2f} s")
        if not self.wait(share * 0.7):
            return False
        verb = "took" if self.v >= (0, 12, 0) else "takes"
        self.engine("monitor.py:1", f"torch.compile {verb} {took:.2f} s in total")
        return True

    def kv_cache(self, args: ServeArgs, share: float) -> bool:
        if not self.wait(share):
            return False
        self.engine("gpu_worker.py:1", "Available KV cache memory: 7.42 GiB")
        self.engine("kv_cache_utils.py:1", "GPU KV cache size: 121,296 tokens")
        concurrency = 121296 / max(args.max_model_len, 1)
        self.engine("kv_cache_utils.py:1",
                    f"Maximum concurrency for {args.max_model_len:,} tokens per request: {concurrency:.2f}x")
        return True

    def cudagraph(self, share: float) -> bool:
        self.log.partial("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/51 "
                         "[00:00<?, ?it/s]")
        if not self.wait(share):
            return False
        took = self.seconds * share
        self.log.emit(f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 51/51 "
                      f"[00:{int(took):02d}<00:00, {51 / max(took, 1e-3):.2f}it/s]")
        self.engine("gpu_model_runner.py:1", f"Graph capturing finished in {took:.0f} secs, took 0.54 GiB")
        return True

    def api(self, share: float) -> bool:
        self.engine("core.py:1", f"init engine (profile, create kv cache, warmup model) took {self.seconds:.2f} "
                                 "seconds")
        return self.wait(share)


TORCH_DTYPES = {"auto": "torch.bfloat16", "bfloat16": "torch.bfloat16", "float16": "torch.float16",
                "half": "torch.float16", "float32": "torch.float32", "float": "torch.float32"}


def engine_config_message(version_text: str, args: ServeArgs, spec: SpecConfig | None) -> str:
    trust_remote_code = args.non_default.get("trust_remote_code") is True
    spec_text = "None" if spec is None else (
        f"SpeculativeConfig(method={spec.method!r}, model={spec.model!r}, num_spec_tokens={spec.num_tokens})")
    return (
        f"Initializing a V1 LLM engine (v{version_text}) with config: model={args.model!r}, "
        f"speculative_config={spec_text}, tokenizer={args.model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, "
        f"revision=None, trust_remote_code={trust_remote_code}, dtype={TORCH_DTYPES.get(args.dtype, args.dtype)}, "
        f"max_seq_len={args.max_model_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={args.tensor_parallel_size}, pipeline_parallel_size=1, data_parallel_size=1, "
        f"quantization=None, enforce_eager={args.enforce_eager}, device_config=cuda, "
        f"served_model_name={args.served_names[0]}, enable_prefix_caching=True, enable_chunked_prefill=True"
    )
