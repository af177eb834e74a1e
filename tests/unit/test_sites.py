import subprocess
import sys

import pytest

from pilot.errors import ConfigError
from pilot.sites import load_site, shipped_sites

EXPECTED = {"local", "container", "cori-haswell", "cori-knl", "perlmutter-cpu", "perlmutter-gpu", "frontier", "polaris",
            "aurora", "stampede3"}


def test_every_shipped_site_loads():
    assert EXPECTED <= set(shipped_sites())
    for name in shipped_sites():
        site = load_site(name, {"account": "m0000"} if name not in ("local", "container", "stampede3") else {})
        assert site.nodes * site.ranks_per_node >= 2 and site.walltime_minutes > 0


def test_sites_that_need_an_account_say_so():
    for name in ("perlmutter-cpu", "perlmutter-gpu", "frontier", "polaris", "aurora", "cori-knl"):
        with pytest.raises(ConfigError, match=f"site {name} needs account: pass --set account=VALUE"):
            load_site(name)


def test_cori_says_it_is_retired():
    assert "retired" in load_site("cori-haswell", {"account": "x"}).description.lower()


def test_pilot_sites_list_and_show():
    out = subprocess.run([sys.executable, "-m", "pilot", "sites"], capture_output=True, text=True, check=True).stdout
    assert all(name in out for name in EXPECTED)
    show = subprocess.run([sys.executable, "-m", "pilot", "sites", "show", "polaris"], capture_output=True, text=True, check=True)
    assert "scheduler: pbspro" in show.stdout
    bad = subprocess.run([sys.executable, "-m", "pilot", "sites", "show", "polarys"], capture_output=True, text=True)
    assert bad.returncode == 2 and "did you mean 'polaris'" in bad.stderr
