"""Speed work must not change results: the full JSON and the HTML page of the bundled sample and of
every fixture scenario equal the golden files written before it (see tests/golden.py)."""
from __future__ import annotations

import copy

import pytest

from . import golden


@pytest.mark.parametrize("name", golden.names())
def test_outputs_equal_the_golden_files(name):
    assert (golden.GOLDEN / f"{name}.json.gz").is_file(), f"no golden file: python -m tests.golden --update {name}"
    old = golden.load(name)
    new = golden.outputs(name)
    assert golden.differences(old["json"], new["json"]) == []
    assert (new["html_bytes"], new["html_sha256"]) == (old["html_bytes"], old["html_sha256"])


def test_the_comparison_sees_a_changed_number_key_and_length():
    a = {"x": 1.0, "y": [1, 2], "z": {"k": "v"}}
    assert golden.differences(a, copy.deepcopy(a)) == []
    assert golden.differences(a, {**a, "x": 1.0 + 1e-12}) == []  # float noise within 1e-9 relative
    assert golden.differences(a, {**a, "x": 1.001}) == ["$.x: 1.0 -> 1.001"]
    assert golden.differences(a, {**a, "y": [1, 2, 3]}) == ["$.y: length 2 -> 3"]
    assert golden.differences(a, {**a, "z": {}}) == ["$.z.k: missing"]
    assert golden.differences(a, {**a, "z": {"k": "w"}}) == ["$.z.k: 'v' -> 'w'"]
    assert golden.differences(a, {**a, "x": 1}) == ["$.x: float '1.0' -> int '1'"]
    assert golden.differences({"b": True}, {"b": 1}) == ["$.b: bool 'True' -> int '1'"]
