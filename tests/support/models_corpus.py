"""The corpus of inputs the document, lock and manifest models are judged on, and its
outcomes (`tests/golden/models/outcomes.json`, replayed by tests/unit/test_models_golden.py).

Invariant: every case goes in through a real entry point and comes out as what a user
sees: a document's frontmatter text through `parse_frontmatter` (the `FrontmatterError`
line, or the accepted model's JSON and Python dumps and the effective training config),
a lock's bytes through `parse_lock` (`LockError` line or `to_bytes()`), a manifest's bytes
through `read_manifest_bytes`, params.yaml overrides through `with_params` (`TrainError`
line or the effective config), a child's JSON through `childproc.decode`; besides, each
model's own `model_validate` on Python values (every error's loc, type and message). The
goldens were written once from the pydantic v2 models these replaced (the commit is in the
file); `outcome` is the one function the generator and the replay share.

    .venv/bin/python -m tests.support.models_corpus   # rewrites the golden file
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "models" / "outcomes.json"
ULID = "01JD3Z8X9Q4W5E6R7T8Y9V0A1K"

# --- values -----------------------------------------------------------------------------

YAML_SCALARS = [
    "0", "1", "-1", "2", "8", "15", "16", "17", "1024", "1025", "131072", "131073", "3.0",
    "3.5", "0.5", "0.05", "0.0", "1.0", "0.999", "-0.5", "1e3", "1.0e+3", "2e-4", "2.0e-4",
    '"2e-4"', '"16"', '" 16 "', '"\\t16\\n"', '"1_000"', "1_000", '"1__0"', '"_1"', '"0x10"',
    "0x10", "0o17", "017", '"017"', '"+5"', '"-5"', '"3.0"', '"3.00"', '"3.50"', '"3."', '".5"',
    '"5."', '" 0.5 "', '"1_0.5"', '"\\u00a05"', '"\\x1c5"', '"\\u00858"', '"\\uff18"',
    '"\\u0663"', '"1e400"', "1.0e+400", "-1.0e+400", "99999999999999999999999",
    "-99999999999999999999999", "4294967295", "4294967296", "1073741824", ".inf", "-.inf",
    ".nan", '"inf"', '"-inf"', '"nan"', '"infinity"', '"Infinity"', '"NaN"', "true", "false",
    "yes", "no", "on", "off", "y", "n", '"yes"', '"no"', '"on"', '"off"', '"t"', '"f"',
    '"true"', '"True"', '"TRUE"', '"1"', '"0"', '"2"', '" true "', '"y"', '"n"', "null", "~",
    '""', '"  "', "abc", "lora", "LORA", "auto", "Auto", '" auto"', "linear", "cosine",
    "constant", "fp32", "bf16", "fp16", "strict", "permissive", "x86-64-v3", "strong", "[1]",
    "[]", "[a]", "[q_proj, v_proj]", "[q_proj, 1]", '[""]', "[[a]]", "[null]", "{}", "{a: 1}",
    "2024-01-01", "2024-01-01T00:00:00", "!!binary aGVsbG8=", "!!set {a}", "!!omap [{a: 1}]",
]  # fmt: skip
HUGE = ['"' + "1" * 4301 + '"', '"' + "1" * 4300 + '"', "1" * 5000, '"' + "1" * 400 + '.5"']
"""Numbers past int()'s digit limit, only for a few fields (`HUGE_FIELDS`)."""
HUGE_FIELDS = {("training", "lora_r"), ("training", "learning_rate"), ("dlm_id",)}

JSON_VALUES = [
    "0", "1", "-1", "2", "42", "1.0", "1.5", "0.5", "0.0", "-0.5", "1e3", "1e400", "NaN",
    "Infinity", "-Infinity", "99999999999999999999999", "4294967296", "true", "false", "null",
    '""', '"x"', '"1"', '" 1 "', '"1.0"', '"0.5"', '"true"', '"yes"', '"strong"',
    '"best-effort"', '"advisory"', '"inf"', "[]", '["a"]', "[1, 2]", "[1.5]", "[true]", '["1"]',
    "{}", '{"a": "b"}', '{"a": 1}', '{"a": null}',
]  # fmt: skip

# --- documents ---------------------------------------------------------------------------

BASE_DOC = {
    "dlm_id": ULID,
    "dlm_version": 1,
    "base_model": "builtin:tiny",
    "training": {
        "lora_r": 8,
        "sources": [{"path": "notes", "include": ["*.md"]}],
    },
}

DOC_FIELDS = [
    ("dlm_id",), ("dlm_version",), ("base_model",), ("system_prompt",), ("training",),
    ("eval",), ("eval", "tasks"), ("export",), ("export", "default_quant"),
    ("export", "default_temperature"), ("export", "default_top_p"), ("training", "adapter"),
    ("training", "lora_r"), ("training", "lora_alpha"), ("training", "lora_dropout"),
    ("training", "target_modules"), ("training", "sequence_len"),
    ("training", "micro_batch_size"), ("training", "grad_accum"), ("training", "learning_rate"),
    ("training", "num_epochs"), ("training", "max_steps"), ("training", "seed"),
    ("training", "lr_scheduler"), ("training", "warmup_ratio"), ("training", "precision"),
    ("training", "gradient_checkpointing"), ("training", "sources"),
    ("training", "sources_policy"), ("training", "cache"), ("training", "cache", "enabled"),
    ("training", "cache", "max_bytes"), ("training", "cache", "prune_older_than_days"),
    ("training", "val_fraction"), ("training", "segment_every"), ("training", "numerics"),
    ("training", "sources", 0), ("training", "sources", 0, "path"),
    ("training", "sources", 0, "include"), ("training", "sources", 0, "exclude"),
    ("training", "sources", 0, "max_bytes_per_file"), ("training", "sources", 0, "max_files"),
]  # fmt: skip

DOC_EXTRA = [
    # unknown, missing and several keys at once, nested positions, odd keys
    "dlm_id: " + ULID + "\nbogus: 1\n",
    "dlm_id: " + ULID + "\nbogus: 1\nother: 2\n",
    "dlm_id: " + ULID + "\n1: x\n",
    "dlm_id: " + ULID + "\nnull: x\n",
    "dlm_id: " + ULID + "\ntraining: {bogus: 1}\n",
    "dlm_id: " + ULID + "\ntraining: {cache: {bogus: 1}}\n",
    "dlm_id: " + ULID + "\ntraining: {sources: [{path: a, bogus: 1}]}\n",
    "dlm_id: " + ULID + "\ntraining: {sources: [{include: [a]}]}\n",
    "dlm_id: " + ULID + "\ntraining: {sources: [{path: a}, {path: ''}, {path: 3}]}\n",
    "dlm_id: " + ULID + "\ntraining: {sources: [{path: a}, 5, {path: b, max_files: 0}]}\n",
    "dlm_id: " + ULID + "\ntraining: {lora_r: 0, lora_alpha: 0, seed: -1, bogus: 2}\n",
    "dlm_id: " + ULID + "\ntraining: {lora_r: x, lora_alpha: x}\nbogus: 1\n",
    "dlm_id: " + ULID + "\neval: {tasks: [a, '', 3, null]}\n",
    "dlm_id: " + ULID + "\neval: {tasks: [a], other: 1}\n",
    "dlm_id: " + ULID + "\nexport: {default_quant: q4, default_temperature: x, z: 1}\n",
    "dlm_id: " + ULID + "\ntraining: {target_modules: [a, 1, null]}\n",
    "dlm_id: " + ULID + "\ntraining: {numerics: auto}\n",
    "dlm_id: " + ULID + "\ntraining: {numerics: bogus, lora_r: 0}\n",
    "dlm_version: 2\n",
    "bogus: 1\n",
    "{}\n",
    "dlm_id: " + ULID.lower() + "\n",
    "dlm_id: " + ULID[:-1] + "\n",
    "dlm_id: 01jd3z8x9q4w5e6r7t8y9v0a1k\ntraining: {learning_rate: '2e-4'}\n",
    "dlm_id: " + ULID + "\ntraining: {sources: [{path: a}], sources_policy: permissive}\n",
    "dlm_id: " + ULID + "\ntraining: {val_fraction: 0.1, gradient_checkpointing: true}\n",
    "dlm_id: " + ULID + "\ntraining: {lora_alpha: 16, warmup_ratio: 0}\n",
    "dlm_id: " + ULID + "\ntraining: {cache: null}\n",
    "dlm_id: " + ULID + "\ntraining: null\n",
    "dlm_id: " + ULID + "\ntraining:\n  lora_r: 8\n  sources:\n    - path: a\n    - path: b\n"
    "      max_files: -1\n",
    "dlm_id: " + ULID + "\ntraining:\n  target_modules:\n    - a\n    - 3\n",
    "dlm_id: " + ULID + "\ntraining:\n  cache:\n    enabled: maybe\n",
]


def _put(tree: Any, where: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(tree)
    node = out
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    return out


def _drop(tree: Any, where: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(tree)
    node = out
    for part in where[:-1]:
        node = node[part]
    del node[where[-1]]
    return out


_MARK = "VALUE_GOES_HERE"
"""A plain word (YAML writes it unquoted), replaced by the text of a value."""


def _parent(tree: Any, where: tuple[Any, ...]) -> Any:
    """`tree` with every mapping on the way to `where` made to exist."""
    out = copy.deepcopy(tree)
    node = out
    for part in where[:-1]:
        if isinstance(part, str) and part not in node:
            node[part] = {}
        node = node[part]
    return out


def doc_specs() -> Iterator[Any]:
    """Each field of `DOC_FIELDS` set to each YAML scalar ([path, text]), then removed
    ([path]), then the texts of `DOC_EXTRA`."""
    for where in DOC_FIELDS:
        for scalar in YAML_SCALARS + (HUGE if where in HUGE_FIELDS else []):
            yield [list(where), scalar]
        yield [list(where)]
    yield from DOC_EXTRA


def render_doc(spec: Any) -> str:
    """The frontmatter text of one of `doc_specs`."""
    import yaml

    if isinstance(spec, str):
        return spec
    where = tuple(spec[0])
    tree = _parent(BASE_DOC, where)
    if len(spec) == 1:
        with contextlib.suppress(KeyError):  # a field the base leaves out stays out
            tree = _drop(tree, where)
        return str(yaml.safe_dump(tree, sort_keys=False))
    template = yaml.safe_dump(_put(tree, where, _MARK), sort_keys=False)
    return str(template).replace(_MARK, spec[1])


# --- locks and manifests -----------------------------------------------------------------

BASE_LOCK: dict[str, Any] = {
    "base_model": "builtin:tiny",
    "base_model_revision": "tiny-6e2e54f2131b67ae",
    "base_model_sha256": "d" * 64,
    "cuda_version": None,
    "determinism_class": "strong",
    "determinism_flags": {"device": "cpu", "deterministic_algorithms": True, "threads": 2},
    "dlm_id": ULID,
    "dlm_sha256": "c" * 64,
    "hardware_tier": "cpu",
    "license_acceptance": {"accepted": True, "license": "MIT", "requires_acceptance": False},
    "lock_version": 1,
    "pinned_versions": {"torch": "2.13.0+cpu", "dlm_git": "0.1.0"},
    "rocm_version": None,
    "seed": 42,
    "supersedes": None,
}
LOCK_FIELDS: list[tuple[Any, ...]] = [(k,) for k in BASE_LOCK] + [
    ("val_fraction",),
    ("license_acceptance", "accepted"),
    ("license_acceptance", "license"),
    ("license_acceptance", "requires_acceptance"),
    ("pinned_versions", "torch"),
    ("determinism_flags", "threads"),
]

BASE_MANIFEST: dict[str, Any] = {
    "schema_version": 1,
    "dlm_id": ULID,
    "dlm_sha256": "a" * 64,
    "section_ids": ["s1", "s2"],
    "sources": {
        "files": [{"relpath": "n/a.md", "sha256": "b" * 64, "size": 3}],
        "merkle_root": "m",
    },
    "tokens": {"root": "r", "rows": 2, "sequences": 2, "tokens": 40},
    "tokenizer_sha256": "t" * 64,
    "base": {
        "spec": "builtin:tiny",
        "kind": "builtin",
        "revision": None,
        "tensor_root": "x",
        "tokenizer_sha256": "t",
        "config_sha256": "c",
    },
    "training_config": {"lora_r": 8, "lora_alpha": 16.0, "target_modules": ["q"]},
    "config_sha256": "c" * 64,
    "lock_sha256": "l" * 64,
    "adapter": {
        "files": {"adapter_model.safetensors": {"sha256": "e" * 64, "size": 10}},
        "tensor_root": "tr",
        "tensors": [{"name": "w", "dtype": "F32", "shape": [2, 3], "digest": "d"}],
    },
    "training": {
        "steps": 1,
        "final_loss_hex": "0x1.0p+0",
        "tokens_trained": 40,
        "skipped_preference_sections": 0,
    },
    "segments": {"every": 1, "count": 1, "chain_root": "z"},
}
MANIFEST_FIELDS: list[tuple[Any, ...]] = [(k,) for k in BASE_MANIFEST] + [
    ("section_ids", 0),
    ("sources", "files"),
    ("sources", "files", 0),
    ("sources", "files", 0, "relpath"),
    ("sources", "files", 0, "size"),
    ("sources", "merkle_root"),
    ("tokens", "rows"),
    ("tokens", "tokens"),
    ("base", "revision"),
    ("base", "config_sha256"),
    ("base", "kind"),
    ("training_config", "lora_r"),
    ("adapter", "files"),
    ("adapter", "files", "adapter_model.safetensors"),
    ("adapter", "files", "adapter_model.safetensors", "size"),
    ("adapter", "tensors"),
    ("adapter", "tensors", 0, "shape"),
    ("adapter", "tensors", 0, "shape", 1),
    ("adapter", "tensors", 0, "dtype"),
    ("training", "steps"),
    ("training", "final_loss_hex"),
    ("segments", "every"),
    ("segments", "count"),
]


def json_specs(base: dict[str, Any], fields: list[tuple[Any, ...]]) -> Iterator[Any]:
    """Each field set to each of `JSON_VALUES` ([path, text]), removed ([path]), an unknown
    key beside it ([path, null]); the base itself ([]), and two whole texts."""
    for where in fields:
        for value in JSON_VALUES:
            yield [list(where), value]
        for spec in ([list(where)], [list(where), None]):
            try:
                render_json(base, spec)
            except (KeyError, IndexError, TypeError):
                continue
            yield spec
    yield []
    yield "[]"
    yield '{"lock_version": 1}'


def render_json(base: dict[str, Any], spec: Any) -> str:
    """The JSON text of one of `json_specs`."""
    if isinstance(spec, str):
        return spec
    if not spec:
        return json.dumps(base, sort_keys=True)
    where = tuple(spec[0])
    if len(spec) == 1:
        return json.dumps(_drop(base, where), sort_keys=True)
    if spec[1] is None:
        return json.dumps(_put(base, (*where[:-1], "zz_unknown"), 1), sort_keys=True)
    template = json.dumps(_put(base, where, _MARK), sort_keys=True)
    return template.replace(json.dumps(_MARK), spec[1])


# --- params.yaml overrides and direct validation --------------------------------------------

PARAMS = [
    f"{{{key}: {value}}}"
    for key in (
        "lora_r",
        "learning_rate",
        "max_steps",
        "seed",
        "lr_scheduler",
        "target_modules",
        "val_fraction",
        "numerics",
        "gradient_checkpointing",
        "warmup_ratio",
        "segment_every",
    )
    for value in (
        "1",
        "0",
        "3.0",
        "3.5",
        '"2e-4"',
        "2e-4",
        "true",
        "null",
        "abc",
        "[a]",
        "[]",
        "0.5",
        "99999999999999999999999",
        ".nan",
        "auto",
        "cosine",
        '" 7 "',
    )
] + ["{lora_r: 0, seed: x}", "{bogus: 1}", "{sources: []}", "{lora_alpha: 32, lora_r: 16}"]

PY_VALUES = [
    "0", "1", "-1", "16", "3.0", "3.5", "0.5", "1e999", "-1e999", "True", "False", "None",
    "'16'", "' 16 '", "'abc'", "'auto'", "b'16'", "b'abc'", "bytearray(b'1')", "()", "('a',)",
    "['a']", "('a', 1)", "{'a'}", "frozenset({'a'})", "{}", "{'a': 1}", "{1: 'a'}", "10**30",
    "2**32", "'2e-4'", "'yes'", "'lora'", "'linear'", "'strict'", "'MIT'", "1j", "[1, 2]",
    "(1, 2)", "[1.0, 2.5]", "{'x': 1.5}",
]  # fmt: skip
PY_MODELS = {
    "doc.schema": [
        "SourceSpec",
        "CacheConfig",
        "TrainingConfig",
        "ExportConfig",
        "EvalConfig",
        "Frontmatter",
    ],
    "lock.schema": ["LicenseAcceptance", "Lock"],
    "manifest.schema": [
        "SourceEntry",
        "SourcesRecord",
        "TokensRecord",
        "BaseRecord",
        "AdapterFile",
        "TensorEntry",
        "AdapterRecord",
        "TrainingResult",
        "SegmentsRecord",
        "Manifest",
    ],
}
PY_BASES: dict[str, dict[str, Any]] = {
    "SourceSpec": {"path": "a"},
    "Frontmatter": {"dlm_id": ULID},
    "LicenseAcceptance": {"license": "MIT", "requires_acceptance": False, "accepted": True},
    "Lock": BASE_LOCK,
    "SourceEntry": {"relpath": "a", "sha256": "b", "size": 1},
    "SourcesRecord": {"files": [], "merkle_root": "m"},
    "TokensRecord": {"root": "r", "rows": 1, "sequences": 1, "tokens": 1},
    "BaseRecord": BASE_MANIFEST["base"],
    "AdapterFile": {"sha256": "s", "size": 1},
    "TensorEntry": {"name": "w", "dtype": "F32", "shape": [1], "digest": "d"},
    "AdapterRecord": BASE_MANIFEST["adapter"],
    "TrainingResult": BASE_MANIFEST["training"],
    "SegmentsRecord": BASE_MANIFEST["segments"],
    "Manifest": BASE_MANIFEST,
}


def _model(module: str, name: str) -> Any:
    import importlib

    return getattr(importlib.import_module(f"dlm_git.{module}"), name)


def py_cases() -> Iterator[tuple[str, str, str, str]]:
    """(module, model, field, value): each field of each model set to each Python value."""
    for module, names in PY_MODELS.items():
        for name in names:
            for field in _model(module, name).model_fields:
                for value in PY_VALUES:
                    yield module, name, field, value
            yield module, name, "", "{}"


# --- outcomes ----------------------------------------------------------------------------


def _digest(obj: object) -> str:
    return hashlib.sha256(repr(obj).encode("utf-8")).hexdigest()[:16]


def _errors(exc: Any) -> list[list[Any]]:
    """Every problem of a refused record: location, type, message (the pydantic models'
    `errors()` when the goldens were written; `dlm_git.validated.ValidationError` since)."""
    if hasattr(exc, "problems"):
        return [[[str(p) for p in e.loc], e.kind, e.message] for e in exc.problems]
    return [[[str(p) for p in e["loc"]], e["type"], str(e["msg"])] for e in exc.errors()]


def _effective(training: Any) -> Any:
    excluded = {"cache", "sources", "sources_policy", "segment_every", "numerics"}
    if not training.gradient_checkpointing:
        excluded.add("gradient_checkpointing")
    if training.val_fraction is None:
        excluded.add("val_fraction")
    return training.model_dump(mode="json", exclude=excluded)


def _accepted(model: Any) -> dict[str, Any]:
    """What an accepted model shows: its JSON dump and its Python dump (types included)."""
    from dlm_git.hashing import canonical_json

    try:
        as_json = canonical_json(model.model_dump(mode="json")).decode("utf-8")
    except ValueError as exc:  # a non-finite float the JSON form cannot hold
        as_json = f"ValueError: {exc}"
    return {"json": _digest(as_json), "python": _digest(model.model_dump())}


RENDER = {
    "doc": render_doc,
    "lock": lambda spec: render_json(BASE_LOCK, spec),
    "manifest": lambda spec: render_json(BASE_MANIFEST, spec),
}


def outcome(kind: str, spec: Any) -> Any:
    """The user-visible outcome of one case (see the module docstring)."""
    from dlm_git.errors import DlmGitError

    text = RENDER[kind](spec) if kind in RENDER else spec
    try:
        return _outcome(kind, text)
    except DlmGitError as exc:
        return {"error": str(exc)}
    except ValueError as exc:  # not a user's error line: a traceback (recorded as it was)
        return {"raised": type(exc).__name__}


def _outcome(kind: str, text: str) -> Any:
    if kind == "doc":
        from dlm_git.doc.parser import parse_frontmatter

        fm = parse_frontmatter(text, Path("d/doc.dlm"))
        return {**_accepted(fm), "training": _digest(_effective(fm.training))}
    if kind == "lock":
        from dlm_git.lock.io import parse_lock

        return {"bytes": _digest(parse_lock(text.encode("utf-8"), "d/dlm.lock").to_bytes())}
    if kind == "manifest":
        from dlm_git.manifest.records import read_manifest_bytes

        return _accepted(read_manifest_bytes(text.encode("utf-8"), "d/manifest.json"))
    if kind == "params":
        return _params(text)
    if kind.startswith("child:"):
        from dlm_git.childproc import decode

        model = _model(*kind.removeprefix("child:").split(":"))
        return _accepted(decode(model, json.loads(text), "request.x"))
    if kind.startswith("py:"):
        return _direct(kind, text)
    raise ValueError(kind)


def _params(text: str) -> Any:
    import dataclasses

    from dlm_git.doc.load import LoadedDocument
    from dlm_git.doc.parser import parse_bytes
    from dlm_git.safeparse import load_yaml
    from dlm_git.train.doc_params import with_params

    fm = "dlm_id: " + ULID + "\ntraining: {lora_r: 4, lora_alpha: 8, sources: [{path: a}]}\n"
    doc = parse_bytes(f"---\n{fm}---\nhello\n".encode(), Path("/r/d/doc.dlm"))
    fields = {f.name: None for f in dataclasses.fields(LoadedDocument)}
    loaded = LoadedDocument(**{**fields, "doc": doc, "repo_root": Path("/r")})
    out = with_params(loaded, load_yaml(text))
    training = out.doc.frontmatter.training
    return {**_accepted(out.doc.frontmatter), "training": _digest(_effective(training))}


def _direct(kind: str, text: str) -> Any:
    _, module, name, field = kind.split(":")
    model = _model(module, name)
    data = dict(PY_BASES.get(name, {}))
    if field:
        data[field] = eval(text, {}, {})  # noqa: S307 (the corpus's own literals)
    else:
        data = ast.literal_eval(text)
    try:
        return _accepted(model.model_validate(data))
    except Exception as exc:
        if hasattr(exc, "errors") or hasattr(exc, "problems"):
            return {"errors": _errors(exc)}
        return {"raised": type(exc).__name__}


def cases() -> Iterator[tuple[str, Any]]:
    """(kind, spec): the input of `outcome`."""
    for spec in doc_specs():
        yield "doc", spec
    for spec in json_specs(BASE_LOCK, LOCK_FIELDS):
        yield "lock", spec
    for spec in json_specs(BASE_MANIFEST, MANIFEST_FIELDS):
        yield "manifest", spec
    for text in PARAMS:
        yield "params", text
    for module, name in (("doc.schema", "TrainingConfig"), ("lock.schema", "Lock")):
        base = {"lr_scheduler": "cosine"} if name == "TrainingConfig" else BASE_LOCK
        for field, value in [("", "null")] + [
            (f, v) for f in ("seed", "lock_version", "lora_alpha") for v in JSON_VALUES
        ]:
            obj = json.loads(json.dumps(base))
            if field:
                obj[field] = json.loads(value, parse_constant=float)
            yield f"child:{module}:{name}", json.dumps(obj)
    for module, name, field, value in py_cases():
        yield f"py:{module}:{name}:{field}", value


def main() -> None:
    """Write the goldens; `--commit SHA`: the commit whose models judged (default: HEAD),
    for a run from an exported tree (`git archive SHA`)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--commit")
    head = (
        parser.parse_args().commit
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    rows, seen = [], {}  # each distinct outcome written once, cases name it by its index
    for kind, spec in cases():
        found = json.dumps(outcome(kind, spec), sort_keys=True)
        rows.append([kind, spec, seen.setdefault(found, len(seen))])
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "commit": head,
        "made_by": "tests/support/models_corpus.py",
        "outcomes": [json.loads(found) for found in seen],
        "cases": rows,
    }
    text = json.dumps(body, indent=0, ensure_ascii=True, separators=(",", ":"))
    GOLDEN.write_text(text + "\n")
    print(f"{len(rows)} cases -> {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    main()
