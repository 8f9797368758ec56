"""The atlas's flags: literal `add_argument` calls, and the flags a dataclass adds in a loop over its fields (vLLM
0.10 on builds the API server's flags that way, so `--chat-template` was missing from every later release)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "atlas"))

from extract import argparse_flags, dataclass_flags  # noqa: E402

# the shape of vLLM's frontend arguments (a base whose classmethod loops over get_kwargs(cls), a subclass adding
# fields), written for this test
LOOPED = '''
class BaseArgs:
    chat_template: str | None = None
    """The file path to the chat template."""
    _private: int = 0
    kind: ClassVar[str] = "x"

    @classmethod
    def add_cli_args(cls, parser):
        from vllm.engine.arg_utils import get_kwargs
        kwargs = get_kwargs(cls)
        group = parser.add_argument_group(title="Frontend")
        for key, value in kwargs.items():
            extra = value.pop("flags", [])
            group.add_argument(*extra, f"--{key.replace('_', '-')}", **value)
        return parser


class ServerArgs(BaseArgs):
    port: int = 8000
    """Port number."""


def make_parser(parser):
    parser.add_argument("--headless", action="store_true", help="Run headless.")
    return ServerArgs.add_cli_args(parser)
'''


def test_a_dataclass_that_adds_its_fields_in_a_loop_gives_each_field_as_a_flag_with_its_docstring() -> None:
    flags = dataclass_flags(ast.parse(LOOPED))
    assert flags == {"--chat-template": "The file path to the chat template.", "--port": "Port number."}
    assert argparse_flags(ast.parse(LOOPED)) == {"--headless": "Run headless."}


def test_a_class_whose_add_cli_args_adds_literal_flags_is_left_to_argparse_flags() -> None:
    literal = '''
class EngineArgs:
    model: str = "m"

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model", type=str, help="Name or path of the model.")
        return parser
'''
    assert dataclass_flags(ast.parse(literal)) == {}
    assert argparse_flags(ast.parse(literal)) == {"--model": "Name or path of the model."}
