"""MLX engine: mlx-lm in the model process (Apple silicon, Linux CPUs); see :mod:`xinference.engines.mlx.engine`."""
