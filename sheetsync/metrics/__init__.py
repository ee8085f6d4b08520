"""Prometheus metrics: the pipeline's events (:mod:`~sheetsync.metrics.events`, recorded
by every process into Redis) and a scrape-time collector of the figures ``status`` shows
(:mod:`~sheetsync.metrics.collector`), served by ``sheetsync metrics``. Every name is in
:mod:`~sheetsync.metrics.names`."""
