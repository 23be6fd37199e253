"""Every module's docstring examples run (the packages and the benchmark): the examples on
public names are tested code."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import codegen
import loopnest
import te
import bench
import fuzz
import tune


def _modules() -> list[str]:
    names = []
    for pkg in (te, loopnest, codegen, tune, fuzz, bench):
        names.append(pkg.__name__)
        names.extend(m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."))
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
