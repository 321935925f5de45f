"""A process with no file descriptor left, for the tests of what a failed write or open says."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator


@contextlib.contextmanager
def no_descriptors_left(spare: int = 16) -> Iterator[None]:
    """Lower this process's descriptor limit to what it holds plus `spare`, then hold those spare ones:
    inside the block every open() fails with EMFILE. Limit and descriptors are given back after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + spare, hard))
    try:
        while True:
            try:
                held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
