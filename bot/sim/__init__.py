"""Simulated GPU host pieces: a fake `vllm` executable and example logs."""
