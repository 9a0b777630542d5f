"""Root conftest: loads the suite's pytest plugin and fixtures for every run.

One module per hook family (fixtures/plugin/), each registered here: a hook or fixture module
missing from this list is silently never called. A module another one imports comes first, so
pytest registers (and rewrites) it before that import.
"""

pytest_plugins = [
    "fixtures.plugin.options",
    "fixtures.plugin.ordering",
    "fixtures.plugin.outcomes",
    "fixtures.plugin.collection",
    "fixtures.plugin.verdict",
    "fixtures.plugin.parametrize",
    "fixtures.plugin.servers",
    "fixtures.plugin.engines",
    "fixtures.plugin.checkpoints",
]
