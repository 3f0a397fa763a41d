"""MLX engine adapter (macOS on Apple silicon); see :mod:`xinference.engines.mlx.engine`."""
