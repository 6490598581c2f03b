"""The offline ``rules`` backend: the primitive memory skills done with text rules.

See ``skillstream.rules.executor`` for what it does and where it falls short of an LLM.
"""

from skillstream.rules.executor import RulesExecutor

__all__ = ["RulesExecutor"]
