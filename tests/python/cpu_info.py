"""What this machine's CPU offers, for tests whose expectations depend on it
(which kernels the CPU backend picks)."""
from __future__ import annotations

import functools


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The ISA flags /proc/cpuinfo lists (empty where it does not exist)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()
