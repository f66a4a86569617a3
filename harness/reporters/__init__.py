"""Reports of a run, each rendered from its results document: console, JUnit XML, Markdown job summary."""
