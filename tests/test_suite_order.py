"""The longest-first order of xdist workers (tests/conftest.py, tests/durations.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import DURATIONS, longest_first


class _Item:
    def __init__(self, nodeid: str, group: str | None = None) -> None:
        self.nodeid, self.group = nodeid, group

    def iter_markers(self, name: str):
        if name == "xdist_group" and self.group:
            yield pytest.mark.xdist_group(self.group).mark

    def __repr__(self) -> str:
        return self.nodeid


def test_modules_and_groups_run_longest_first_tests_keep_their_order() -> None:
    items = [_Item("a.py::t1"), _Item("a.py::t2"),
             _Item("b.py::t1"), _Item("b.py::t2"),
             _Item("g1.py::t1", "g"), _Item("c.py::t1"), _Item("g2.py::t1", "g"),
             _Item("d.py::t1"), _Item("e.py::t1")]
    seconds = {"a.py": 5, "b.py": 50, "g1.py": 20, "g2.py": 20, "c.py": 30, "d.py": 5}
    got = [i.nodeid for i in longest_first(items, seconds)]
    # b (50), the group g (g1 + g2: 40, contiguous), c (30), a and d (5 each: file
    # order), then e (unlisted); inside each piece the collection order
    assert got == ["b.py::t1", "b.py::t2", "g1.py::t1", "g2.py::t1", "c.py::t1",
                   "a.py::t1", "a.py::t2", "d.py::t1", "e.py::t1"]
    # no data: the collection order, a group gathered where it first appears (the
    # scheduler hands out a group as one piece at that point anyway)
    assert [i.nodeid for i in longest_first(items, {})] == [
        "a.py::t1", "a.py::t2", "b.py::t1", "b.py::t2", "g1.py::t1", "g2.py::t1",
        "c.py::t1", "d.py::t1", "e.py::t1"]


def test_the_committed_durations_name_existing_modules() -> None:
    """A renamed or deleted module must not linger in the data (it would order nothing)."""
    root = Path(__file__).resolve().parents[1]
    modules = json.loads(DURATIONS.read_text(encoding="utf-8"))["modules"]
    missing = [m for m in modules if not (root / m).is_file()]
    assert not missing, f"tests/durations.json lists modules that do not exist: {missing}"
    assert all(isinstance(v, (int, float)) and v > 0 for v in modules.values())


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    """A real `-n 2 --dist loadgroup` session over a tiny suite with this conftest:
    the three tests of a group land on one worker (without the suffix fix they were
    spread over both: xdist hands out the first units one per worker)."""
    import os
    import shutil
    import subprocess
    import sys

    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    record = ("import os\nfrom pathlib import Path\n\n"
              "def _here(name):\n"
              "    Path(__file__).with_name(name).write_text(os.environ['PYTEST_XDIST_WORKER'])\n")
    (tmp_path / "test_a.py").write_text(
        "import pytest\n" + record + "pytestmark = pytest.mark.xdist_group('g')\n" +
        "".join(f"\ndef test_{k}():\n    _here('a{k}')\n" for k in range(3)))
    (tmp_path / "test_b.py").write_text(
        record + "".join(f"\ndef test_{k}():\n    _here('b{k}')\n" for k in range(3)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                           "--no-loadscope-reorder", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    workers = {name: (tmp_path / name).read_text() for name in
               ("a0", "a1", "a2", "b0", "b1", "b2")}
    assert workers["a0"] == workers["a1"] == workers["a2"], workers
    assert len(set(workers.values())) == 2, workers  # both workers were in use
