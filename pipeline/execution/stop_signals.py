"""The signals that ask a running job to save a checkpoint and stop.

- SIGTERM: ``scancel``, ``kill``, the local driver stopping its jobs (``pipeline.execution.driver_stop``);
- SIGINT: Ray's cancel of a running task (``ray.cancel``), Ctrl-C;
- SIGURG: SLURM's walltime warning (``profiles/slurm`` submits every job with ``--signal=URG@<lead seconds>``). SLURM
  sends it to every process of the job's step, the embedded Ray's GCS server and raylet included. Those two stop on
  SIGTERM (and would take the training worker down mid-save) but, like any process without a handler, ignore
  SIGURG: only the job's driver and its training task, which handle it, react.
"""

import signal

JOB_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGURG)
