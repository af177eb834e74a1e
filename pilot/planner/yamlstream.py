"""The planner's names for the bounded Pegasus YAML reader, which lives in pilot.util (see boundedload, yamlstream).

Pegasus files keep their scalars as text and have no size limit (a workflow
of a million jobs is hundreds of megabytes); nesting and what aliases repeat
are bounded as for every YAML file pilot reads. The block YAML that Pegasus.api
writes is read by a quick line reader (pilot.util.yamllines), anything else by
libyaml's events, with the same values and the same errors.
"""

from __future__ import annotations

from pilot.util.boundedload import load_pegasus as load
from pilot.util.boundedload import load_pegasus_streaming as load_streaming
from pilot.util.yamlstream import ALIAS_FLOOR, ALIAS_RATIO, MAX_DEPTH, Handler

__all__ = ["ALIAS_FLOOR", "ALIAS_RATIO", "MAX_DEPTH", "Handler", "load", "load_streaming"]
