"""What continuous-batching engines (Transformers, MLX) share: request plans, the decode loop, outputs."""
