"""Previews and benchmarks, timed with ``timing``: GPU-hours (``cost``), memory (``fit``), throughput per model
(``throughput_sizes``), GPT vs DiffEqFormer (``throughput``), Lyapunov Jacobians (``jacobian``), a DAG's phases
(``dag``)."""
