"""Prompt templates: data files with named variables, in English and Chinese.

Templates live in ``prompts/<lang>/<name>.txt`` and use ``$name`` / ``${name}`` placeholders
(``string.Template``; a literal dollar sign is written ``$$``). ``render`` fails loudly on a missing
variable or a missing template, so a prompt is never sent with a hole in it.
"""

from __future__ import annotations

import string
from functools import lru_cache
from importlib import resources

from skillstream.errors import ConfigError

LANGUAGES = ("en", "zh")


@lru_cache(maxsize=128)
def load(name: str, lang: str = "en") -> string.Template:
    """The template ``name`` in ``lang`` (falls back to English when a language lacks it)."""
    for code in (lang, "en"):
        if code not in LANGUAGES:
            continue
        res = resources.files(__name__).joinpath(code, f"{name}.txt")
        if res.is_file():
            return string.Template(res.read_text(encoding="utf-8"))
    raise ConfigError(f"no prompt template {name!r} for language {lang!r} (looked in {LANGUAGES})")


def render(name: str, lang: str = "en", **variables: object) -> str:
    """Fill template ``name`` with ``variables``; every placeholder must be given."""
    tpl = load(name, lang)
    try:
        return tpl.substitute({k: str(v) for k, v in variables.items()})
    except KeyError as e:
        raise ConfigError(f"prompt {name!r} ({lang}) needs variable {e.args[0]!r}") from e
    except ValueError as e:
        raise ConfigError(f"prompt {name!r} ({lang}) is malformed: {e}") from e


def variables(name: str, lang: str = "en") -> set[str]:
    """The placeholder names a template uses."""
    tpl = load(name, lang)
    return {
        m.group("named") or m.group("braced")
        for m in tpl.pattern.finditer(tpl.template)
        if m.group("named") or m.group("braced")
    }
