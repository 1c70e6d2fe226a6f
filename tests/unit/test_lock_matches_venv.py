"""requirements/lock.txt is what this venv holds (issue 29): every distribution installed
here is in the lock at the version installed, every lock entry carries sha256 hashes, and
requirements/constraints.txt is the lock's versions and nothing else.

`make venv` installs the lock with `pip install --require-hashes --no-deps`; a
distribution installed some other way (a `pip install` by hand, an extra added to
pyproject.toml without regenerating the lock) shows here as one line naming it. Not in
the lock, by design: dlm-git itself (installed editable from this checkout, which pip
cannot hash) and pip (the installer, from the interpreter's ensurepip).
"""

from __future__ import annotations

import re
import sysconfig
from importlib import metadata
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements"
LOCK = REQUIREMENTS / "lock.txt"
CONSTRAINTS = REQUIREMENTS / "constraints.txt"
NOT_LOCKED = {"dlm-git", "pip"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(text: str) -> dict[str, tuple[str, int]]:
    """name -> (version, number of sha256 hashes) of each entry of a pip-compile lock."""
    out: dict[str, tuple[str, int]] = {}
    name = ""
    for line in text.splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonical(pin[1])
            out[name] = (pin[2], 0)
        elif name and HASH.search(line):
            out[name] = (out[name][0], out[name][1] + len(HASH.findall(line)))
    return out


def installed() -> dict[str, str]:
    """name -> version of every distribution in this venv's site-packages."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions(path=paths)}


def offenders(venv: dict[str, str], lock: dict[str, tuple[str, int]]) -> list[str]:
    """One line per installed distribution the lock lacks or pins at another version."""
    lines = []
    for name, version in sorted(venv.items()):
        if name in NOT_LOCKED:
            continue
        if name not in lock:
            lines.append(f"{name}=={version} is installed but not in {LOCK.name}")
        elif lock[name][0] != version:
            lines.append(f"{name}=={version} is installed; {LOCK.name} pins {lock[name][0]}")
    return lines


def test_every_installed_distribution_is_locked_at_its_version() -> None:
    problems = offenders(installed(), locked(LOCK.read_text("utf-8")))
    assert not problems, "\n".join(
        [*problems, "(hint: make lock, then make venv; see docs/supply-chain.md)"]
    )


def test_a_venv_unlike_the_lock_is_named_line_by_line() -> None:
    lock = locked(LOCK.read_text("utf-8"))
    venv = {name: version for name, (version, _) in lock.items()}
    assert offenders(venv, lock) == []
    venv["pytest"] = "0.0.1"
    venv["left-pad"] = "1.0"
    assert offenders(venv, lock) == [
        "left-pad==1.0 is installed but not in lock.txt",
        f"pytest==0.0.1 is installed; lock.txt pins {lock['pytest'][0]}",
    ]


def test_every_lock_entry_has_sha256_hashes() -> None:
    lock = locked(LOCK.read_text("utf-8"))
    assert {"torch", "setuptools", "build", "model-signing", "lm-eval"} <= set(lock)
    assert [name for name, (_, hashes) in lock.items() if hashes == 0] == []


def test_constraints_are_the_locks_versions() -> None:
    """constraints.txt (for `pip install -c` elsewhere) is the lock less its hashes and
    local version labels (torch 2.13.0+cpu is torch==2.13.0 there)."""
    lock = locked(LOCK.read_text("utf-8"))
    lines = [ln for ln in CONSTRAINTS.read_text("utf-8").splitlines() if not ln.startswith("#")]
    pins = {canonical(m[1]): m[2] for m in map(PIN.match, lines) if m}
    assert len(pins) == len(lines), "a constraints line that is not name==version"
    assert pins == {name: version.split("+")[0] for name, (version, _) in lock.items()}
