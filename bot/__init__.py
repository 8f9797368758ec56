"""specops: ChatOps for speculative-decoding deployments of vLLM."""

__version__ = "0.1.0"
