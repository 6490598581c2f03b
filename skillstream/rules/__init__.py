"""The offline ``rules`` backend: primitive memory skills done with text rules (see ``executor``)."""

from skillstream.rules.executor import RulesExecutor

__all__ = ["RulesExecutor"]
