"""dlm-git's build backend: setuptools, then its wheel and sdist made byte-reproducible.

Invariant: the same source files (their bytes and executable bits) and the same
SOURCE_DATE_EPOCH give byte-identical artifacts, whatever the umask, the files' mtimes
and the user who builds. setuptools 84 already dates the wheel's entries by
SOURCE_DATE_EPOCH and writes both archives in a fixed (sorted) order; it copies each
file's permission bits from disk into both, dates the sdist's members by their mtimes,
names the builder's user and group in the tar, and stamps the gzip header with the
time of the build. This module rewrites both archives once setuptools has written them:
the same entries in the same order with the same bytes, every date the epoch, every
file 0644 (0755 where any execute bit is set), every directory 0755, owner 0:0 with no
names, and the gzip header dated by the epoch. The epoch is SOURCE_DATE_EPOCH, or
without it 2020-02-02 (hatchling's default), so a build is reproducible either way.
Everything else (metadata, editable installs) is setuptools' own, through
`from setuptools.build_meta import *`.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every hook not redefined here)

DEFAULT_EPOCH = 1580601600  # 2020-02-02T00:00:00Z, hatchling's default
ZIP_MIN_EPOCH = 315532800  # 1980-01-01T00:00:00Z: a zip entry cannot be dated earlier


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name: str = _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    normalize_wheel(Path(wheel_directory) / name, epoch())
    return name


def build_sdist(sdist_directory: str, config_settings: dict[str, object] | None = None) -> str:
    name: str = _setuptools.build_sdist(sdist_directory, config_settings)
    normalize_sdist(Path(sdist_directory) / name, epoch())
    return name


def epoch() -> int:
    """SOURCE_DATE_EPOCH (the commit's time, as `make release` sets it), else the default."""
    value = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(value) if value.isdigit() else DEFAULT_EPOCH


def _mode(mode: int, is_dir: bool) -> int:
    return 0o755 if is_dir or mode & 0o111 else 0o644


def normalize_wheel(path: Path, when: int) -> None:
    """Rewrite the wheel with every entry dated `when` and its permissions normalized."""
    stamp = time.gmtime(max(when, ZIP_MIN_EPOCH))[:6]
    out = io.BytesIO()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            new = zipfile.ZipInfo(info.filename, date_time=stamp)
            is_dir = info.is_dir()
            kind = 0o040000 if is_dir else 0o100000
            new.external_attr = (kind | _mode(info.external_attr >> 16, is_dir)) << 16
            new.create_system = 3  # Unix: the permission bits are meaningful
            new.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(new, src.read(info))
    path.write_bytes(out.getvalue())


def normalize_sdist(path: Path, when: int) -> None:
    """Rewrite the sdist: members sorted, dated `when`, owned by 0:0, modes normalized,
    and the gzip header dated `when`."""
    tar_bytes = io.BytesIO()
    with tarfile.open(path, "r:gz") as src:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for member in members:
                data = src.extractfile(member) if member.isfile() else None
                member.mtime = when
                member.uid = member.gid = 0
                member.uname = member.gname = ""
                member.mode = _mode(member.mode, member.isdir())
                member.pax_headers = {}
                dst.addfile(member, data)
    out = io.BytesIO()
    inner = path.name.removesuffix(".gz")
    with gzip.GzipFile(inner, "wb", compresslevel=9, fileobj=out, mtime=when) as gz:
        gz.write(tar_bytes.getvalue())
    path.write_bytes(out.getvalue())
