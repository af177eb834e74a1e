"""Site configurations shipped with pilot (one YAML file per site); see pilot.sites."""
