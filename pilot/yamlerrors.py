"""One wording for YAML that does not parse: ``file:line: not valid YAML: problem``."""

from __future__ import annotations

import yaml

from pilot.errors import ConfigError


def yaml_error(path: str, exc: Exception) -> ConfigError:
    if isinstance(exc, yaml.reader.ReaderError):  # bytes, not text: its own message names a position, not a line
        if "control characters" in str(exc.reason):
            return ConfigError(
                f"{path}: not valid YAML: a control character (code {exc.character}) at character "
                f"{exc.position}: is this the right file?"
            )
        return ConfigError(f"{path}: not valid YAML: not UTF-8 text (byte {exc.position}): is this the right file?")
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else path
    return ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}")
