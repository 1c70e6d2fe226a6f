"""A real S3-protocol server for tests: moto's server on 127.0.0.1, started and stopped
by a fixture, with a bucket and the environment DVC's S3 remote (dvc-s3) needs.

Nothing leaves the machine: the endpoint is 127.0.0.1 and the credentials are moto's
test values; `remote_env` carries them to DVC subprocesses.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ACCESS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str

    @property
    def env(self) -> dict[str, str]:
        """What a DVC subprocess needs to reach the server (no proxy for 127.0.0.1)."""
        return {**ACCESS, "AWS_DEFAULT_REGION": REGION, "NO_PROXY": "127.0.0.1"}

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=ACCESS["AWS_SECRET_ACCESS_KEY"],
        )

    def keys(self, prefix: str = "") -> list[str]:
        pages = (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def s3_server(bucket: str = "dlm-git-remote") -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        s3 = S3Server(f"http://127.0.0.1:{port}", bucket)
        s3.client().create_bucket(Bucket=bucket)
        yield s3
    finally:
        server.stop()
