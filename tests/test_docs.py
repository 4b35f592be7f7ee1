"""Every command and Python example in README.md and docs/*.md runs as written.

The convention (also in docs/README.md; new docs follow it):

* A fenced block tagged ```python runs. The blocks of one file run top to bottom
  in ONE namespace (a later block may use what an earlier one defined), with the
  working directory set to a fresh temporary directory that holds sample data:
    photos/  an image folder (4 classes, 80 small photos from tfpipe.sample_data)
    data/    photos/ converted with --split train=0.9,val=0.1 (train and val splits)
    out/     the same dataset again
  (`data/` or `out/` is left out when the file's own commands convert into it).
* In a block tagged ```bash, ```sh, ```shell or ```console, every line that starts
  with `tfpipe ` (after an optional `$ `) runs through the real CLI (in-process,
  click's runner) and must exit 0; a trailing ` # comment` is dropped and a line
  ending in `\\` continues on the next. Other lines (pip, make, python -m ...)
  are not run. Untagged and ```text / ```yaml / ```json blocks never run: use
  ```text for synopses (`tfpipe convert SRC OUT [--format ...]`) and output.
* HTML comments right before a block (invisible on GitHub) change how it runs:
    <!-- not-run: REASON -->     the block is skipped; REASON is required. Keep these
                                 rare and real (needs a GPU, a cloud runner).
    <!-- run-first:             hidden Python run before the block, in the same
    model = ...                  namespace: define the names a fragment assumes
    -->                          (`ds`, `seed`, a small `model`).
    <!-- file: NAME             write NAME (relative to the working directory)
    ...contents...               before the block, e.g. the `train.py` a
    -->                          `tfpipe doctor train.py:make_dataset` line imports.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^([ \t]*)```([\w+-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.S | re.M)
DIRECTIVE = re.compile(r"<!--\s*(not-run|run-first|file)\s*:?(.*?)-->", re.S)


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    body: str
    skip: str | None = None
    setup: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of `path` with the directives just before each."""
    text = path.read_text(encoding="utf-8")
    out: list[Block] = []
    last = 0
    for m in FENCE.finditer(text):
        # a block indented inside a list item runs dedented (so do its directives)
        block = Block(path, text.count("\n", 0, m.start()) + 1, m.group(2).lower(),
                      textwrap.dedent(m.group(3)))
        # the directives that immediately precede the block (only blank lines and
        # other directives between them and the fence)
        between = text[last:m.start()].rstrip()
        found = []
        while between.endswith("-->"):
            d = [x for x in DIRECTIVE.finditer(between) if x.end() == len(between)]
            if not d:
                break
            found.append(d[-1])
            between = between[:d[-1].start()].rstrip()
        for d in reversed(found):
            kind, rest = d.group(1), d.group(2)
            if kind == "not-run":
                if not rest.strip():
                    raise AssertionError(f"{block.where()}: <!-- not-run: --> needs a reason")
                block.skip = rest.strip()
            elif kind == "run-first":
                block.setup.append(textwrap.dedent(rest.strip("\n")))
            else:
                name, _, content = rest.lstrip().partition("\n")
                block.files[name.strip()] = textwrap.dedent(content)
        out.append(block)
        last = m.end()
    return out


def commands(block: Block) -> list[list[str]]:
    """`tfpipe ...` lines of a shell block as argument lists (without `tfpipe`)."""
    lines: list[str] = []
    pending = ""
    for raw in block.body.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        lines.append(line)
    out = []
    for line in lines:
        if line.startswith("$ "):
            line = line[2:]
        if not line.startswith("tfpipe "):
            continue
        out.append(shlex.split(line, comments=True)[1:])
    return out


def runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang == "python" or b.lang in SHELL]


def has_runnable(path: Path) -> bool:
    """A doc whose every code block is not-run (each with its reason) has nothing to test."""
    return any(not b.skip and (b.lang == "python" or list(commands(b))) for b in runnable(path))


# ----------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """photos/ and its conversion, made once; each doc gets a copy."""
    from tfpipe import sample_data
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("docs-sample")
    sample_data.make_image_folder(root / "photos", num_classes=4, per_class=20,
                                  size_range=(64, 96))
    convert(root / "photos", root / "data", split="train=0.9,val=0.1")
    return root


def _workdir(sample: Path, tmp: Path, doc: Path) -> Path:
    converts_into = {args[2].rstrip("/") for b in runnable(doc) if b.lang in SHELL
                     for args in commands(b) if args[:1] == ["convert"] and len(args) > 2}
    shutil.copytree(sample / "photos", tmp / "photos")
    for name in ("data", "out"):
        if name not in converts_into:
            shutil.copytree(sample / "data", tmp / name)
    return tmp


def _run_cli(args: list[str], where: str) -> None:
    from click.testing import CliRunner

    from tfpipe.cli.main import cli

    result = CliRunner().invoke(cli, args, catch_exceptions=True)
    if result.exit_code != 0:
        detail = result.output[-3000:]
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            detail += "".join(traceback.format_exception(result.exception))[-3000:]
        raise AssertionError(f"{where}: `tfpipe {shlex.join(args)}` exited "
                             f"{result.exit_code}:\n{detail}")


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d for d in DOCS if has_runnable(d)],
                         ids=[str(d.relative_to(ROOT)) for d in DOCS if has_runnable(d)])
def test_doc_runs_as_written(doc: Path, sample: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    work = _workdir(sample, tmp_path, doc)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))  # `tfpipe doctor mypkg.data:fn`: an importable module
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in runnable(doc):
        if block.skip:
            continue
        for name, content in block.files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(content)
        for code in block.setup:
            exec(compile(code, f"{block.where()} (run-first)", "exec"), namespace)  # noqa: S102
        if block.lang == "python":
            exec(compile(block.body, block.where(), "exec"), namespace)  # noqa: S102
            ran += 1
        else:
            for args in commands(block):
                _run_cli(args, block.where())
                ran += 1
    assert ran, f"{doc}: nothing ran"


# ------------------------------------------------------------- the convention
def test_harness_reads_the_convention(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "Intro.\n\n```bash\npip install x\n$ tfpipe env --json   # comment\n"
        "tfpipe bench imagenet \\\n    --steps 2\n```\n\n"
        "<!-- not-run: needs a GPU -->\n```python\nraise SystemExit\n```\n\n"
        "<!-- run-first:\nseed = 1\n-->\n<!-- file: a/b.py\nX = 1\n-->\n"
        "```python\nprint(seed)\n```\n\n```text\ntfpipe convert SRC OUT [--x]\n```\n")
    bs = blocks(doc)
    assert [b.lang for b in bs] == ["bash", "python", "python", "text"]
    assert commands(bs[0]) == [["env", "--json"], ["bench", "imagenet", "--steps", "2"]]
    assert bs[1].skip == "needs a GPU" and bs[0].skip is None and bs[2].skip is None
    assert bs[2].setup == ["seed = 1"] and bs[2].files == {"a/b.py": "X = 1\n"}
    assert [b.lang for b in runnable(doc)] == ["bash", "python", "python"]


@pytest.mark.slow
def test_a_saved_model_with_normalize_loads_in_a_fresh_process(tmp_path: Path) -> None:
    """docs/augment-pixel.md: `keras.models.load_model` of a model holding
    `tfpipe.augment.Normalize` in a fresh process: the same outputs once
    `tfpipe.augment` is imported; without the import Keras's error says what to import."""
    import keras
    import numpy as np

    from tfpipe.augment import Normalize

    model = keras.Sequential([keras.Input((4, 4, 3), dtype="uint8"),
                              Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    path = tmp_path / "m.keras"
    model.save(path)
    x = np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.asarray(model(x)))
    # one fresh process: first without importing tfpipe (Keras's error must say what
    # to import), then after `import tfpipe.augment` (the same outputs)
    code = ("import sys, numpy as np, keras\n"
            "try:\n    keras.models.load_model(sys.argv[1])\n"
            "except TypeError as e:\n    print('ERROR:', e)\n"
            "else:\n    sys.exit('loaded without the import?')\n"
            "import tfpipe.augment\n"
            "m = keras.models.load_model(sys.argv[1])\n"
            "np.testing.assert_array_equal(np.asarray(m(np.load(sys.argv[2]))), np.load(sys.argv[3]))\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"),
                           str(tmp_path / "y.npy")], capture_output=True, text=True,
                          timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert "import tfpipe.augment before keras.models.load_model" in proc.stdout, proc.stdout
