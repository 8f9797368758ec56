"""What a failing start of the fake vLLM prints on stderr: a Python traceback whose frames claim a pip install
of vLLM, ending in the error vLLM raises.
"""

from __future__ import annotations

from collections.abc import Sequence

Frame = tuple[str, int, str, str]  # file, line, function, source: one traceback entry

# Where the fake's tracebacks claim to come from: a typical pip install of vLLM.
VLLM_DIR = "/usr/local/lib/python3.12/dist-packages/vllm"
CLI_FRAMES: tuple[Frame, ...] = (
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (f"{VLLM_DIR}/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    (f"{VLLM_DIR}/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
)
CONFIG_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/utils/argparse_utils.py", 1, "parse_args", "args = self._pull_args_from_config(args)"),
    (f"{VLLM_DIR}/utils/argparse_utils.py", 1, "load_config_file", "raise ValueError("),
)
SPEC_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/engine/arg_utils.py", 1, "create_engine_config",
     "speculative_config = self.create_speculative_config("),
    (f"{VLLM_DIR}/engine/arg_utils.py", 1, "create_speculative_config",
     "return SpeculativeConfig(**self.speculative_config)"),
)
BIND_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/entrypoints/openai/api_server.py", 1, "setup_server", "sock = create_server_socket(sock_addr)"),
    (f"{VLLM_DIR}/entrypoints/openai/api_server.py", 1, "create_server_socket", "sock.bind(addr)"),
)
DFLASH_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/v1/engine/core.py", 1, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (f"{VLLM_DIR}/v1/spec_decode/dflash.py", 1, "__init__", "raise NotImplementedError("),
)


class StartupError(Exception):
    """A failure vLLM reports as a Python traceback on stderr before exiting with status 1."""

    def __init__(self, final: str, frames: Sequence[Frame] = ()) -> None:
        super().__init__(final)
        self.final = final
        self.frames = tuple(frames)

    def render(self) -> str:
        lines = ["Traceback (most recent call last):"]
        for path, line, func, source in (*CLI_FRAMES, *self.frames):
            lines.append(f'  File "{path}", line {line}, in {func}')
            lines.append(f"    {source}")
        lines.append(self.final)
        return "\n".join(lines) + "\n"
