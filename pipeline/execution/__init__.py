"""Running one job: the environment it reads, its phase markers, its stop signals, and its work as a Ray task."""
