"""SGLang engine adapter (CUDA GPUs on Linux); see :mod:`xinference.engines.sglang.engine`."""
