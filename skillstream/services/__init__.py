"""Services: core logic combined with the stores.

Memory search, the task-skill API, lifecycle operations on a home, task-skill publishing and the
memory-pipeline factory. Core packages below never import this package; the CLI, the evaluations
and the flows do.
"""
