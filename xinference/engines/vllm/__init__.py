"""vLLM engine adapter (CUDA GPUs on Linux); see :mod:`xinference.engines.vllm.engine`."""
