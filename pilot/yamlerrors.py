"""One wording for YAML that does not parse: ``file:line: not valid YAML: problem``."""

from __future__ import annotations

from pilot.errors import ConfigError


def yaml_error(path: str, exc: Exception) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else path
    return ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}")
