"""Start the real `cm synthetic-model serve` as a subprocess and read the base URL from its banner."""

from __future__ import annotations

import os
import re
import select
import subprocess
import time

from conftest import CM, hook_env

from cmrunner.synthetic.fakemodel import stop_process


class Served:
    def __init__(self, process: subprocess.Popen, banner: str, base_url: str) -> None:
        self.process = process
        self.banner = banner
        self.base_url = base_url


def start(*args: str) -> Served:
    process = subprocess.Popen([CM, "synthetic-model", "serve", "--minutes", "5", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=hook_env())
    banner = b""
    deadline = time.monotonic() + 30
    while b"network-test" not in banner:
        if process.poll() is not None or time.monotonic() > deadline:
            stop_process(process)
            raise AssertionError(f"the synthetic model did not start: {banner!r} {process.stderr.read()!r}")
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            banner += os.read(process.stdout.fileno(), 65536)
    found = re.search(r"http://127\.0\.0\.1:\d+/v1", banner.decode())
    assert found, banner
    return Served(process, banner.decode(), found.group(0))
