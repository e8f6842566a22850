"""Previews and benchmarks, beside the science: GPU-hours (``cost``), per-device memory (``fit``), measured training
throughput per model (``throughput_sizes``), GPT vs DiffEqFormer (``throughput``), the Lyapunov Jacobians
(``jacobian``) and a DAG's time by phase (``dag``); all timed with ``timing``."""
