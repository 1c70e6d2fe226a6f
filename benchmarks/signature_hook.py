"""What signature checking adds to the pre-commit hook, per document.

Builds a git + DVC repository of N tiny documents (`dlm-git init`'s starter, `max_steps:
1`), trains them with `dvc repro`, signs every document (`dlm-git sign`, a key from
`dlm-git keygen`), trusts the key (`git config dlm-git.trustedKeys`) and commits. Then
the everyday change: every document's `.dlm` edited, `dvc repro`, `dlm-git sign`, `git
add -A`, so the hook checks all N documents and their fresh signatures.

Timed, alternating, REPS times each after one untimed round (medians):
- off: `python -m dlm_git.hooks.pre_commit` with the `dlm.sig` files taken out of the
  index (`git rm --cached`) and `dlm-git.requireSignature false`: nothing to judge, the
  baseline;
- on:  the same with the `dlm.sig` files staged (a staged signature is judged whether or
  not one is required: cryptography imported, the trusted keys and HEAD's policy read,
  every bundle parsed, its ECDSA signature and binding checked);
- required: as on, with `dlm-git.requireSignature true`.
Prints (on - off) / N and (required - off) / N against the target (<= 30 ms per
document) and the ratio on/off. Always exits 0.

    .venv/bin/python benchmarks/signature_hook.py [--docs 1,10] [--reps 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate, medians, timed

TARGET_MS = 30.0


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "DVC_NO_ANALYTICS": "1"}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    proc = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def dlm(cwd: Path, *args: str) -> None:
    sh(cwd, sys.executable, "-m", "dlm_git", *args)


def build(root: Path, ndocs: int, key: Path) -> Path:
    repo = root / f"repo-{ndocs}"
    repo.mkdir()
    sh(repo, "git", "init", "-q")
    sh(repo, "git", "config", "user.email", "bench@dlm-git.invalid")
    sh(repo, "git", "config", "user.name", "bench")
    docs = [f"d{i:02d}" for i in range(ndocs)]
    for doc in docs:
        dlm(repo, "init", "--doc", doc, "--no-hooks")
        text = (repo / doc / f"{doc}.dlm").read_text("utf-8")
        (repo / doc / f"{doc}.dlm").write_text(text.replace("max_steps: 20", "max_steps: 1"))
    sh(repo, sys.executable, "-m", "dvc", "repro")
    dlm(repo, "sign", "--key", str(key))
    dlm(repo, "hooks", "install")
    sh(repo, "git", "config", "dlm-git.trustedKeys", str(key.with_name("dlm-signing-key.pub.pem")))
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", "trained and signed")
    for doc in docs:  # the everyday change, on every document
        path = repo / doc / f"{doc}.dlm"
        path.write_text(path.read_text("utf-8") + "\nOne more line of prose.\n", "utf-8")
    sh(repo, sys.executable, "-m", "dvc", "repro")
    dlm(repo, "sign", "--key", str(key))
    sh(repo, "git", "add", "-A")
    return repo


def hook_ms(repo: Path) -> float:
    seconds, proc = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "dlm_git.hooks.pre_commit"], cwd=repo, capture_output=True
        )
    )
    if proc.returncode != 0:
        raise SystemExit(f"the hook refused the change:\n{proc.stderr.decode()}")
    return seconds * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", default="1,10")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlm-sighook-") as tmp:
        root = Path(tmp)
        dlm(root, "keygen", "--out", str(root / "keys"))
        key = root / "keys" / "dlm-signing-key.pem"
        for n in (int(x) for x in args.docs.split(",")):
            repo = build(root, n, key)
            sigs = [str(p.relative_to(repo)) for p in sorted(repo.glob("d*/dlm.sig"))]

            def sample(mode: str, _round: int, repo: Path = repo, sigs: list[str] = sigs) -> float:
                value = "true" if mode == "required" else "false"
                sh(repo, "git", "config", "dlm-git.requireSignature", value)
                if mode == "off":
                    sh(repo, "git", "rm", "-q", "--cached", *sigs)
                else:
                    sh(repo, "git", "add", *sigs)
                return hook_ms(repo)

            med = medians(alternate(("off", "on", "required"), args.reps, sample))
            off, on, req = (med[m] for m in ("off", "on", "required"))
            print(
                f"{n} document(s): off {off:.1f} ms, on {on:.1f} ms, required {req:.1f} ms"
                f" (medians of {args.reps})"
            )
            for name, value in (("on", on), ("required", req)):
                per_doc = (value - off) / n
                verdict = "PASS" if per_doc <= TARGET_MS else "FAIL"
                print(f"  {name}: ratio {value / off:.3f}; signatures add {per_doc:.1f} ms/doc")
                print(f"  {verdict}: target <= {TARGET_MS:.0f} ms per document")
    return 0


if __name__ == "__main__":
    sys.exit(main())
