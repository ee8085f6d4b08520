"""The Prometheus exporter (``sheetsync metrics``): at each scrape, the figures ``status``
shows (:mod:`~sheetsync.ops.status`) and the events the pipeline recorded
(:mod:`~sheetsync.metrics.events`), read by :mod:`~sheetsync.exporter.collector` and
served on ``/metrics`` by :mod:`~sheetsync.exporter.server`, with ``GET /demand``, the
worker processes the backlog can use (:mod:`~sheetsync.ops.demand`), for autoscalers."""
