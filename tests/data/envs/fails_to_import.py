"""A module that fails as it is imported."""

raise RuntimeError("this environment cannot be imported")
