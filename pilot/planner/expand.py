"""``${NAME}`` in the catalogs and properties, replaced by the environment variable, as Pegasus expands them.

Pegasus' rule (reference guide, "Variable Expansion"): a variable is written ``${NAME}``, braces required and
the name case-sensitive; ``$NAME`` without braces is left as written; a variable that cannot be expanded is an
error. pilot expands where a catalog names a place: a site's directory paths and file server URLs, a
transformation's pfns, a container's image and mounts, a replica's pfn, every profile value, and each value of
the properties file. A variable left unset is one line naming it and where it is written, before anything is
checked or planned, so a catalog's ``${HOME}/scratch`` is the directory, never the text.
"""

from __future__ import annotations

import os
import re

from pilot.errors import ConfigError

VARIABLE = re.compile(r"\$\{([^}]*)\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def expand(text: str, where: str) -> str:
    """``text`` with each ``${NAME}`` replaced by the variable's value; ``where`` (``file: YAML path`` or
    ``file:line``) names the place in the error of a variable that is unset or no variable's name."""
    if "${" not in text:
        return text

    def value(m: re.Match) -> str:
        name = m.group(1)
        if not NAME.match(name):
            raise ConfigError(
                f"{where}: ${{{name}}} names no environment variable (letters, digits and '_', not "
                "starting with a digit): correct the name, or write the value itself"
            )
        found = os.environ.get(name)
        if found is None:
            raise ConfigError(
                f"{where}: ${{{name}}} is not set in the environment: set {name} (export {name}=...) "
                "before planning, or write the value itself"
            )
        return found

    return VARIABLE.sub(value, text)
