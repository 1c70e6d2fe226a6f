"""A task template from a commit costs bounded time and memory (docs/eval.md, "Tasks",
templates): one outside the allow-list is refused in one line where the task is
checked, and one that would pass a bound while it renders (its size comes from the
row) stops in one error, the same on every machine; the templates real tasks use still
render as lm-eval renders them.

Each render case runs lm-eval's own `apply_template` under `eval.harness`'s template
environment in a child process with a memory limit and a timeout, so a regression fails
here instead of hanging or exhausting the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dlm_git.eval.record import EvalError
from dlm_git.eval.sandbox import BoundedSandbox, TemplateRefused, problem
from dlm_git.eval.taskdef import TEMPLATE_KEYS, load_tasks, worktree
from dlm_git.eval.templatebudget import MAX_STEPS, MAX_TEXT
from dlm_git.eval.templaterules import MAX_TEMPLATE
from tests.support.env import subprocess_env
from tests.support.evaltasks import GEN_YAML, MC_YAML, write_tasks

DOC = "demo"
MC_TEXT_LINE = 'doc_to_text: "Question: {{question}}\\nAnswer:"'
BIG = "abc " * 30_000  # 120,000 characters: a long row field

# ------------------------------------------------------------------ refused when checked

REFUSED = {
    "repeat-a-text": ('{{ "x" * 10**10 }}', "the operator *"),
    "power-tower": ("{{ 9**9**9 }}", "the operator **"),
    "percent-padding": ('{{ "%0999999999d" % 1 }}', "the operator %"),
    "center-filter": ('{{ "a"|center(1000000000) }}', "the filter 'center'"),
    "ljust-method": ('{{ "a".ljust(1000000000) }}', "the method 'ljust'"),
    "format-method": ('{{ "{:>999999999}".format(1) }}', "the method 'format'"),
    "indent-filter": ('{{ "x"|indent(1000000000) }}', "the filter 'indent'"),
    "wordwrap-filter": ("{{ question|wordwrap(1, true, question) }}", "the filter 'wordwrap'"),
    "format-filter": ('{{ "%999999999d"|format(1) }}', "the filter 'format'"),
    "batch-filter": ('{{ question|batch(1000000000, "x")|list }}', "the filter 'batch'"),
    "slice-filter": ("{{ question|slice(1000000000)|list }}", "the filter 'slice'"),
    "loops-three-deep": (
        "{% for a in question %}{% for b in question %}{% for c in question %}."
        "{% endfor %}{% endfor %}{% endfor %}",
        "nests loops over 2 deep",
    ),
    "namespace-growth": (
        '{% set ns = namespace(s="x") %}{% for i in range(64) %}'
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "calls 'namespace'",
    ),
    "set-doubling-in-a-loop": (
        "{% set s = question %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}{{ s }}",
        "set inside a loop",
    ),
    "recursive-macro": (
        "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}",
        "a macro (macros recurse)",
    ),
    "call-block": ("{% call g() %}{% call g() %}x{% endcall %}{% endcall %}", "a call block"),
    "regex-replace": ('{{ question|regex_replace("(a+)+$", "") }}', "'regex_replace'"),
    "lipsum": ("{{ lipsum(1000000000) }}", "calls 'lipsum'"),
    "recursive-loop": (
        "{% for x in range(30) recursive %}{{ loop(range(x)) }}{% endfor %}",
        "a recursive loop",
    ),
    "python-internals": ("{{ lipsum.__globals__['os'].system('true') }}", "(unsafe)"),
    "include": ('{% include "other.yaml" %}', "an include"),
    "random-filter": ("{{ choices|random }}", "the filter 'random'"),
    "chained-compare": ("{{ 1 < label < 3 }}", "chains comparisons"),
    "map-by-filter": ('{{ choices|map("center", 1000000000)|list }}', "map other than"),
    "star-args": ("{{ question.split(*choices) }}", "*args"),
    "too-long": ("{{ question }}" + "x" * MAX_TEMPLATE, "characters long"),
    "nested-too-deep": ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "does not parse"),
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write_tasks(root / DOC)
    return root


def task_with(repo: Path, template: str, key: str = "doc_to_text") -> str:
    """The multiple-choice task with `key` set to `template` (a JSON string is YAML)."""
    lines = [line for line in MC_YAML.splitlines() if not line.startswith(f"{key}:")]
    lines.insert(7, f"{key}: {json.dumps(template)}")
    (repo / DOC / "evals" / "mc.yaml").write_text("\n".join(lines) + "\n", "utf-8")
    return "evals/mc.yaml"


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_template_outside_the_rules_is_refused_where_the_task_is_checked(
    repo: Path, case: str
) -> None:
    template, why = REFUSED[case]
    with pytest.raises(EvalError) as caught:
        load_tasks(worktree(repo), DOC, (task_with(repo, template),))
    line = caught.value.one_line()
    assert line.startswith("demo/evals/mc.yaml:8: `doc_to_text` is a template"), line
    assert why in line and "\n" not in line and "(hint: " in line, line


@pytest.mark.parametrize("key", ["doc_to_target", "doc_to_choice", "description"])
def test_every_key_lm_eval_renders_is_judged(repo: Path, key: str) -> None:
    with pytest.raises(EvalError, match=f"`{key}` is a template .*'center'"):
        load_tasks(worktree(repo), DOC, (task_with(repo, '{{ "a"|center(999999999) }}', key),))


def test_a_template_in_an_included_file_is_judged(repo: Path) -> None:
    base = MC_YAML.replace(MC_TEXT_LINE, "doc_to_text: '{{ 9**9**9 }}'")
    (repo / DOC / "evals" / "base.yaml").write_text(base, "utf-8")
    (repo / DOC / "evals" / "child.yaml").write_text("include: base.yaml\ntask: mc2\n", "utf-8")
    with pytest.raises(EvalError, match=r"demo/evals/base\.yaml:8: `doc_to_text` .*\*\*"):
        load_tasks(worktree(repo), DOC, ("evals/child.yaml",))


@pytest.mark.parametrize("case", ["repeat-a-text", "recursive-macro", "python-internals"])
def test_the_render_path_refuses_what_the_check_refuses(case: str) -> None:
    """One rule: a template the check refuses never compiles in the sandbox either."""
    with pytest.raises(TemplateRefused, match="it "):
        BoundedSandbox().from_string(REFUSED[case][0])


# ------------------------------------------------------------------ bounded while rendering

RENDER = """
import json, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import lm_eval.utils as lm_utils
from dlm_git.eval.harness import _sandboxed_templates
template, doc = json.loads(sys.stdin.read())
try:
    with _sandboxed_templates():
        out = lm_utils.apply_template(template, doc)
except Exception as exc:
    print(type(exc).__name__ + ": " + str(exc))
else:
    print("rendered " + str(len(out)))
"""
MEMORY = 2 << 30  # what a render may take here, with lm-eval imported (well above the bounds)

OVER = {
    "nested-range-loops": (
        "{% for a in range(99999) %}{% for b in range(99999) %}x{% endfor %}{% endfor %}",
        {},
        "OverBudget: its loops run over",
    ),
    "nested-loops-over-a-field": (
        "{% for a in question %}{% for b in question %}.{% endfor %}{% endfor %}",
        {"question": BIG},
        "OverBudget: its loops run over",
    ),
    "literal-text-in-a-loop": (
        "{% for i in range(99999) %}" + "y" * 60_000 + "{% endfor %}",
        {},
        "OverBudget: its loops run over",
    ),
    "set-doubling-with-tilde": (
        "{% set s = question %}" + "{% set s = s ~ s %}" * 64 + "{{ s|length }}",
        {"question": BIG},
        "OverBudget: a joined text would be",
    ),
    "set-doubling-with-plus": (
        "{% set s = question %}" + "{% set s = s + s %}" * 64 + "{{ s|length }}",
        {"question": BIG},
        "OverBudget: a sum would be",
    ),
    "replace-empty-method": (
        '{{ question.replace("", question) }}',
        {"question": BIG},
        "OverBudget: a replaced text would be",
    ),
    "replace-empty-filter": (
        '{{ question|replace("", question) }}',
        {"question": BIG},
        "OverBudget: a replaced text would be",
    ),
    "join-with-a-field": (
        "{{ question|list|join(question) }}",
        {"question": BIG},
        "OverBudget: a joined text would be",
    ),
    "output-in-a-loop": (
        "{% for i in range(99999) %}{{ question }}{% endfor %}",
        {"question": BIG},
        "OverBudget: the rendered text would be",
    ),
    "a-field-over-the-cap": ("{{ question }}", {"question": "x" * (2 * MAX_TEXT)}, "OverBudget"),
    "compare-big-fields": (
        "{% for i in range(9999) %}{{ question == answer }}{% endfor %}",
        {"question": BIG, "answer": BIG + ""},
        "OverBudget: it reads and builds over",
    ),
    "strip-by-a-field": (
        "{{ question.strip(question) }}",
        {"question": BIG},
        "OverBudget: it reads and builds over",
    ),
    "redos-at-render": (
        '{{ question|regex_replace("(a+)+$", "") }}',
        {"question": "a" * 40 + "!"},
        "TemplateRefused: it uses the filter 'regex_replace'",
    ),
    "padding-at-render": ('{{ "a"|center(1000000000) }}', {}, "TemplateRefused"),
}


def render_in_child(template: str, doc: dict[str, object]) -> str:
    """What lm-eval's `apply_template` does with `template` and `doc` under the harness's
    environment, in a child limited to `MEMORY` bytes and 120 seconds."""
    proc = subprocess.run(
        [sys.executable, "-c", RENDER, str(MEMORY)],
        input=json.dumps([template, doc]),
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("case", sorted(OVER))
def test_a_render_past_a_bound_stops_in_one_error(case: str) -> None:
    template, doc, said = OVER[case]
    assert problem(template) is None or said.startswith("TemplateRefused")
    assert render_in_child(template, doc).startswith(said)


def test_each_render_has_its_own_budget() -> None:
    """Two renders that each spend most of the loop budget both complete."""
    template = BoundedSandbox().from_string("{% for i in range(n) %}{% endfor %}{{ n }}")
    n = MAX_STEPS // 3
    assert template.render(n=n) == template.render(n=n) == str(n)


# ------------------------------------------------------------------ real templates still render

REAL = [  # shapes from lm-eval's own tasks (arc, coqa, wsc273, jsquad, mutual, ...)
    ("Question: {{question}}\nAnswer:", {"question": "Why?"}),
    ("{{ answers['text'][0] }}", {"answers": {"text": ["x", "y"]}}),
    (
        "Question: {{question}}\n\nOptions:\n\n{% for i in range(choices['text']|length) %}"
        "\t{{ 'ABCD'[i] }}: {{ choices['text'][i] }}\n{% endfor %}",
        {"question": "q", "choices": {"text": ["a", "b", "c"]}},
    ),
    (
        "{% set index = pronoun_loc + pronoun | length %}{{text[index:]}}",
        {"pronoun_loc": 4, "pronoun": "he", "text": "and he went"},
    ),
    (
        "{% set template = text[:pronoun_loc] %}{{[template+options[0], template+options[1]]}}",
        {"text": "ab cd", "pronoun_loc": 3, "options": ["x", "y"]},
    ),
    ("{{answers|map(attribute='atext')|list}}", {"answers": [{"atext": "a"}, {"atext": "b"}]}),
    (
        "文脈：{% set _context = context.split('[SEP]')[-1] %}{{ _context | trim }}",
        {"context": "a[SEP] b "},
    ),
    (
        '{{story+"\\n\\n"}}{% for i in range(questions|length-1) %}{{"Q: "+questions[i]+"\\n\\n"'
        '+"A: "+answers["input_text"][i]+"\\n\\n"}}{% endfor %}{{"Q: "+questions[-1]+"\\n\\nA:"}}',
        {"story": "s", "questions": ["a", "b"], "answers": {"input_text": ["x", "y"]}},
    ),
    (
        "{{ label if label is defined else 0 }} {{ choices.index(answer) }} {{ x.strip() }}"
        "{{ (answer ~ '!')|upper }} {{ 'b' in choices and not x is none }} {{ -label }}",
        {"label": 2, "choices": ["a", "b"], "answer": "b", "x": " y "},
    ),
    (
        "{% for choice in choices %}- {{ choice }}\n{% else %}none{% endfor %}"
        "{{ choices|join(', ') }} {{ d.get('k', 'z') }} {{ (choices|first)|capitalize }}"
        "{% for k, v in d.items() %}{{ k }}={{ v|string|replace('1', 'one') }}{% endfor %}",
        {"choices": ["a", "b"], "d": {"k": 1}},
    ),
    (
        "{{ question[:3] }}{{ question[::-1] }}{{ question|length }}{{ 7|int + 1 }}",
        {"question": "hello"},
    ),
    (
        "{{ 'a' in d.keys() }}{% for k in d.values() %}{{ k }}{% endfor %}{{ d.items()|list }}",
        {"d": {"a": 1}},
    ),
]
FIXTURES = [
    (line.split(": ", 1)[1], {"question": "What is?"})
    for text in (MC_YAML, GEN_YAML)
    for line in text.splitlines()
    if line.startswith("doc_to_text:")
]


@pytest.mark.parametrize("index", range(len(REAL) + len(FIXTURES)))
def test_the_templates_real_tasks_use_render_as_lm_eval_renders_them(index: int) -> None:
    import lm_eval.utils as lm_utils

    template, doc = [*REAL, *[(json.loads(t), d) for t, d in FIXTURES]][index]
    assert problem(template) is None
    bounded = BoundedSandbox().from_string(template).render(**doc)
    assert bounded == lm_utils.env.from_string(template).render(**doc)  # lm-eval's own


class _TagsAsNothing(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """lm-eval's own task files, read for their template strings only (`!function` is
    lm-eval's tag: read as nothing here); libyaml's parser where PyYAML has it (the same
    documents, ten times faster over lm-eval's 14,000 files)."""


_TagsAsNothing.add_multi_constructor("", lambda loader, suffix, node: None)


@pytest.mark.slow
def test_every_template_of_lm_evals_own_tasks_passes_the_rules() -> None:
    import lm_eval

    checked, refused = 0, []
    for path in sorted((Path(lm_eval.__file__).parent / "tasks").rglob("*.yaml")):
        try:
            config = yaml.load(path.read_text("utf-8"), _TagsAsNothing)  # noqa: S506
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(config, dict):
            continue
        for key in TEMPLATE_KEYS:
            if isinstance(config.get(key), str):
                checked += 1
                why = problem(config[key])
                if why is not None:
                    refused.append(f"{path.name}: {key}: {why}")
    assert checked > 8000 and refused == []
