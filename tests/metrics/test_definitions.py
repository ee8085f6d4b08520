"""The exporter serves exactly the metrics of ``sheetsync.metrics.names.DEFINITIONS``, each
with its type, labels and help: the docs' metrics reference is generated from that
table, so what it lists is what a scrape shows."""

from __future__ import annotations

from prometheus_client.core import Metric

from sheetsync import emit_answer_submitted
from sheetsync.exporter.collector import PipelineCollector
from sheetsync.metrics import events
from sheetsync.metrics.names import BY_NAME, DEFINITIONS, LEDGER_TRANSITIONS, SOURCE_UP
from sheetsync.services import Services


def _labels(family: Metric) -> set[str]:
    return {label for sample in family.samples for label in sample.labels} - {"le"}


def test_a_scrape_serves_every_definition_as_defined(pipeline: Services, world) -> None:
    form = world.form("defined")
    world.sheet(form)
    for answer_id in world.answers(form, 2, prefix="defined"):
        emit_answer_submitted(answer_id)  # a buffer, a job, a ledger transition
    events.publish(pipeline.redis)

    served = {family.name: family for family in PipelineCollector(pipeline).collect()}

    assert set(served) == set(BY_NAME)
    for definition in DEFINITIONS:
        family = served[definition.name]
        assert family.type == definition.kind, definition.name
        assert family.documentation == definition.help, definition.name
        if family.samples and definition.labels:
            assert _labels(family) == set(definition.labels), definition.name
        assert _labels(family) <= set(definition.labels), definition.name
    # Not vacuous: the emits gave the labelled counters and gauges samples to check.
    assert _labels(served[LEDGER_TRANSITIONS]) == {"to"}
    assert _labels(served[SOURCE_UP]) == {"source"}
