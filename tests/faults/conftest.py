"""Fixtures of the fault suite: small and read-only filesystems (a tmpfs mounted as root; without root they fail)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def _mount(target: Path, options: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True, text=True)
    if done.returncode != 0:  # make test and CI run as root; elsewhere the test fails with the reason, never skips
        pytest.fail(f"could not mount a tmpfs (the filesystem fault tests need root): {done.stderr.strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    """size -> a folder on a fresh tmpfs of that many bytes (unmounted at the end); `ro=True` mounts it read-only."""
    mounted: list[Path] = []

    def make(size: int = 1 << 20, ro: bool = False) -> Path:
        target = tmp_path / f"fs{len(mounted)}"
        _mount(target, f"size={size}" + (",ro" if ro else ""))
        mounted.append(target)
        return target

    yield make
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], capture_output=True)
