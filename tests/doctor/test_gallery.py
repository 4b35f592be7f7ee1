"""Each gallery pipeline has one anti-pattern: doctor reports exactly that rule, and
nothing above info on the fixed twin."""

from __future__ import annotations

import pytest

from tfpipe import doctor

from .gallery import GALLERY, Case

# Machine-independent defaults: a 4-CPU process on a 4-CPU host, 1 GiB for caches.
BASE = {"cpus": 4, "host_cpus": 4, "ram_budget_bytes": 1 << 30}


def _check(ds, case: Case):
    return doctor.check(ds, **{**BASE, **case.kwargs})


@pytest.mark.parametrize("case", GALLERY, ids=[c.id for c in GALLERY])
def test_gallery(case: Case, record_files, tmp_path):
    bad, clean = case.build(record_files, str(tmp_path))
    found = _check(bad, case)
    assert {f.rule for f in found} == {case.rule}, [(f.rule, f.message) for f in found]
    assert all(f.severity == found[0].severity for f in found)
    if case.function is not None:
        assert {f.function for f in found} == {case.function}
    fixed = _check(clean, case)
    assert case.rule not in {f.rule for f in fixed}, [(f.rule, f.message) for f in fixed]
    assert all(f.severity == "info" for f in fixed), [(f.rule, f.message) for f in fixed]
    # Silencing the rule by id removes it.
    assert [f for f in doctor.check(bad, ignore=[case.rule], **{**BASE, **case.kwargs})
            if f.rule == case.rule] == []


def test_every_rule_has_a_gallery_case():
    # the tabular rules read a config's statistics, not a graph: test_tabular_rules.py
    assert {c.rule for c in GALLERY} == set(doctor.RULES) - set(doctor.TABULAR_RULES)
