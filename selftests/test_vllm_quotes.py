"""Every finding's and platform limit's `vllm_says` is vLLM's own words: found, word for word, in
the installed target's source at the file it names (the embedded target's vLLM in the cpu
environment: `.ci/run` runs this file there). A quote that is not there, or no longer there,
fails. Without vLLM installed (the selftest environment) the check has nothing to read and
skips, saying where it runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fixtures.spec.catalog import load_catalog
from fixtures.spec.expectations import Quote, load_expectations


def normalised(source: str) -> str:
    """A source file as one line of words: each line without its indent and comment marks, so a
    quote of a docstring or a comment spanning lines matches as written."""
    return " ".join(" ".join(line.strip().lstrip("#") for line in source.splitlines()).split())


def missing(quote: Quote, package: Path) -> str | None:
    """Why the quote is not vLLM's words at its place, or None when it is."""
    path = package / quote.path
    if not path.is_file():
        return f"{quote.path} is not a file of the installed vllm package"
    if quote.quote not in normalised(path.read_text(errors="replace")):
        return f"{quote.path} does not say {quote.quote!r}"
    return None


def test_normalised_reads_docstrings_and_comments_across_lines():
    source = '    """Sleep mode is\n    not supported."""\n    # the cache is\n    #   kept\n'
    assert "Sleep mode is not supported." in normalised(source)
    assert "the cache is kept" in normalised(source)


def test_a_quote_not_in_its_file_is_named(tmp_path):
    (tmp_path / "worker.py").write_text('logger.warning("sleep is not supported, ignore it")\n')
    assert missing(Quote("sleep is not supported, ignore it", "worker.py, a log line"), tmp_path) is None
    assert "does not say" in str(missing(Quote("sleep frees memory", "worker.py, a log line"), tmp_path))
    assert "not a file" in str(missing(Quote("x", "gone.py, a docstring"), tmp_path))


def test_every_quote_is_in_the_installed_vllm_source():
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no vLLM installed here: this check runs in the cpu environment "
                    "(.tox/cpu/bin/python -m pytest selftests/test_vllm_quotes.py; .ci/run does)")
    package = Path(next(iter(spec.submodule_search_locations)))
    problems = []
    for exp in load_expectations(load_catalog()):
        why = missing(exp.vllm_says, package) if exp.vllm_says is not None else None
        if why:
            problems.append(f"{exp.behaviour}: {why}")
    assert not problems, f"the vLLM at {package} does not say:\n" + "\n".join(problems)
