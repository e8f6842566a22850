"""Running one job: the environment it reads, its phase markers, its stop signals, its work as a Ray task, and
the one sentence a failed job ends with (``errors``)."""
