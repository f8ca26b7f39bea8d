"""The examples in the public API's docstrings run and print what they show."""

from __future__ import annotations

import doctest

import pytest

import common.api
import common.engine.registry
import common.engine.result
import common.graph.io
import common.graph.model


@pytest.mark.parametrize("module", [common.api, common.engine.registry, common.graph.model, common.graph.io,
                                    common.engine.result], ids=lambda m: m.__name__)
@pytest.mark.slow_cases("common.api")
def test_docstring_examples(module):
    outcome = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert outcome.failed == 0
    if module in (common.api, common.engine.registry, common.graph.model):
        assert outcome.attempted > 0             # the examples exist, and ran
