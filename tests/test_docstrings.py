"""The examples in the docstrings run and print what they say (doctest over the installed package)."""

import doctest
import importlib
import pkgutil
import warnings

import pytest

import ppgm

warnings.filterwarnings("ignore", category=FutureWarning)

import ppgm.adapters  # noqa: E402

# every module of the engine's layer subpackages and of the adapters
MODULES = sorted(
    {m.name for m in pkgutil.walk_packages(ppgm.__path__, "ppgm.") if m.name != "ppgm.__main__"
     and not m.name.startswith("ppgm.adapters")}
    | {m.name for m in pkgutil.walk_packages(ppgm.adapters.__path__, "ppgm.adapters.")}
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


def _sections(doc: str) -> set:
    import re

    return set(re.findall(r"\n\s*(Parameters|Returns|Yields|Raises|Examples|Attributes)\n\s*-{3,}", "\n" + (doc or "")))


def test_every_public_name_has_numpydoc_sections():
    """Parameters (when it takes any), Returns (functions and methods) and Examples, on every
    public name of ppgm and ppgm.adapters and their public methods."""
    import inspect

    import ppgm.adapters as pa

    gaps = []

    def check(qual, obj):
        doc = inspect.getdoc(obj) or ""
        have = _sections(doc)
        try:
            params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            params = []
        need = {"Examples"} | ({"Parameters"} if params else set()) | (set() if inspect.isclass(obj) else {"Returns"})
        if need - have:
            gaps.append(f"{qual}: {sorted(need - have)}")

    for mod in (ppgm, pa):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            check(f"{mod.__name__}.{name}", obj)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod))):
                        check(f"{mod.__name__}.{name}.{attr}", getattr(obj, attr))
    assert not gaps, f"{len(gaps)} gaps:\n" + "\n".join(gaps)
