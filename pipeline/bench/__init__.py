"""The pipeline's own measurements, timed with ``timing``: training throughput per model for the planning previews
(``throughput_sizes``), GPT vs DiffEqFormer (``throughput``), Lyapunov Jacobians (``jacobian``), a DAG's phases
(``dag``)."""
