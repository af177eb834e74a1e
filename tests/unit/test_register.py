"""Registration: pegasus-rc-client's map lines into Pegasus' JDBCRC tables, read back by Pegasus' own DB layer."""

from __future__ import annotations

import sqlite3

import pytest

from pilot.data import register


def test_insert_twice_records_each_copy_once(tmp_path):
    db, mapfile = tmp_path / "wf-0.replicas.db", tmp_path / "reg.in"
    mapfile.write_text('f.c file:///out/f.c site="local"\nf.d file:///out/f.d site="local" checksum.type="sha256"\n')
    assert register.main(["--db", str(db), "--insert", str(mapfile)]) == 0
    assert register.main(["--db", str(db), "--insert", str(mapfile)]) == 0  # a rerun of the job changes nothing
    con = sqlite3.connect(db)
    rows = con.execute("select lfn, pfn, site from rc_lfn natural join rc_pfn order by lfn").fetchall()
    meta = con.execute("select key, value from rc_meta").fetchall()
    con.close()
    assert rows == [("f.c", "file:///out/f.c", "local"), ("f.d", "file:///out/f.d", "local")]
    assert meta == [("checksum.type", "sha256")]


def test_pegasus_reads_what_it_wrote(tmp_path):
    """Pegasus' own ORM of the JDBCRC schema (pegasus-wms) finds the rows."""
    pytest.importorskip("Pegasus.db.schema")
    from Pegasus.db.schema import RCLFN
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    db, mapfile = tmp_path / "rc.db", tmp_path / "reg.in"
    mapfile.write_text('f.c file:///out/f.c site="local"\n')
    assert register.main(["--db", str(db), "--insert", str(mapfile)]) == 0
    session = Session(bind=create_engine(f"sqlite:///{db}"))
    try:
        (lfn,) = session.query(RCLFN).all()
        assert lfn.lfn == "f.c" and [(p.pfn, p.site) for p in lfn.pfns] == [("file:///out/f.c", "local")]
    finally:
        session.close()


def test_a_bad_map_line_fails_the_job_naming_it(tmp_path, capsys):
    mapfile = tmp_path / "reg.in"
    mapfile.write_text("justonefield\n")
    assert register.main(["--db", str(tmp_path / "x.db"), "--insert", str(mapfile)]) == 1
    assert f"{mapfile}:1: expected 'LFN PFN site=\"SITE\"'" in capsys.readouterr().err
