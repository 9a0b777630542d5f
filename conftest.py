"""Root conftest: loads the suite's pytest plugin and fixtures for every run."""

pytest_plugins = ["fixtures.plugin.outcomes", "fixtures.plugin.engines"]
