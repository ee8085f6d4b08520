"""Every image the Dockerfiles and the compose files pull is named by tag and digest
(``redis:7@sha256:...``): a re-pushed tag changes nothing until a pull request (Renovate's,
renovate.json) moves the digest. Images built here (``build:``) are not pulled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from support.paths import ROOT

#: name:tag@sha256:<64 hex digits>
PINNED = re.compile(r"[^\s@:]+(?:/[^\s@:]+)*:[^\s@:]+@sha256:[0-9a-f]{64}")
DOCKERFILES = ("Dockerfile", "emulator/Dockerfile")


def dockerfile_images(path: Path) -> list[str]:
    """What each FROM pulls (not ``scratch``, not an earlier stage)."""
    images, stages = [], set()
    for line in path.read_text().splitlines():
        found = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if found is None:
            continue
        image, stage = found.group(1), found.group(2)
        if image != "scratch" and image.lower() not in stages:
            images.append(image)
        if stage:
            stages.add(stage.lower())
    return images


def compose_images(path: Path) -> list[tuple[str, str]]:
    """(service, image) of each service that pulls its image rather than building it."""
    services = (yaml.safe_load(path.read_text()) or {}).get("services") or {}
    return [
        (name, str(service["image"]))
        for name, service in services.items()
        if "image" in service and "build" not in service
    ]


def references() -> list[tuple[str, str]]:
    found = [(name, image) for name in DOCKERFILES for image in dockerfile_images(ROOT / name)]
    for path in sorted(ROOT.glob("docker-compose*.yml")):
        found += [(f"{path.name}: {service}", image) for service, image in compose_images(path)]
    return found


def test_the_files_pull_some_images() -> None:
    images = {image.split("@")[0] for _, image in references()}
    assert {"python:3.11-slim", "redis:7", "postgres:15"} <= images


@pytest.mark.parametrize(("where", "image"), references())
def test_every_pulled_image_is_pinned_by_digest(where: str, image: str) -> None:
    assert PINNED.fullmatch(image), f"{where}: {image} has no digest (name:tag@sha256:...)"
