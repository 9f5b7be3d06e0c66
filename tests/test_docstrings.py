"""The examples in the docstrings run and print what they say (doctest over the installed package)."""

import doctest
import importlib
import pkgutil
import warnings

import pytest

import ppgm

warnings.filterwarnings("ignore", category=FutureWarning)

import ppgm.adapters  # noqa: E402

MODULES = sorted(
    {m.name for m in pkgutil.iter_modules(ppgm.__path__, "ppgm.") if m.name not in ("ppgm.__main__", "ppgm.adapters")}
    | {m.name for m in pkgutil.iter_modules(ppgm.adapters.__path__, "ppgm.adapters.")}
    | {"ppgm", "ppgm.adapters"}
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_public_api_documented_with_examples():
    import inspect

    import ppgm.adapters as pa

    missing = []
    for mod in (ppgm, pa):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and "Examples" not in (obj.__doc__ or ""):
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, f"public objects without an Examples section: {missing}"
