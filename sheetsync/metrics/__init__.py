"""Prometheus metrics as the pipeline records them: the events (:mod:`~sheetsync.metrics.events`,
counted by every process into Redis) and every metric's name (:mod:`~sheetsync.metrics.names`).
The exporter that serves them is :mod:`sheetsync.exporter`, a layer above."""
