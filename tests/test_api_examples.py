"""The examples in the public API's docstrings run and print what they show."""

from __future__ import annotations

import doctest

import pytest

import common.engine
import common.graph
import common.io
import common.result


@pytest.mark.parametrize("module", [common.engine, common.graph, common.io, common.result],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    outcome = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert outcome.failed == 0
    if module in (common.engine, common.graph):
        assert outcome.attempted > 0             # the examples exist, and ran
