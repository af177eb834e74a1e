"""Record outputs in the output replica catalog: the registration jobs' program.

Pegasus' registration jobs run ``pegasus-rc-client --insert MAPFILE`` (a Java
client) against the output replica catalog, by default an SQLite file in the
submit directory, ``<workflow>-0.replicas.db``, in Pegasus' JDBCRC schema:
``rc_lfn`` (one row a file name), ``rc_pfn`` (its copies, with their site) and
``rc_meta`` (its attributes). This writes the same tables with the standard
library's sqlite3, so pegasus-rc-client, Pegasus' Python DB layer or any SQL
client reads what it wrote. A map line is ``LFN PFN site="SITE"`` with
optional ``key="value"`` attributes. Inserting a copy already recorded
changes nothing, so a rerun of a registration job is harmless.

    python -m pilot.data.register --db FILE --insert MAPFILE
"""

from __future__ import annotations

import argparse
import shlex
import sqlite3
import sys

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rc_lfn (lfn_id INTEGER NOT NULL PRIMARY KEY, lfn VARCHAR(245) NOT NULL, "
    "CONSTRAINT UNIQUE_LFN UNIQUE (lfn))",
    "CREATE TABLE IF NOT EXISTS rc_pfn (pfn_id INTEGER NOT NULL PRIMARY KEY, lfn_id INTEGER NOT NULL, "
    "pfn VARCHAR(245) NOT NULL, site VARCHAR(245), CONSTRAINT UNIQUE_PFN UNIQUE (lfn_id, pfn, site), "
    "FOREIGN KEY(lfn_id) REFERENCES rc_lfn (lfn_id) ON DELETE CASCADE)",
    'CREATE TABLE IF NOT EXISTS rc_meta (lfn_id INTEGER NOT NULL, "key" VARCHAR(245) NOT NULL, '
    'value VARCHAR(245) NOT NULL, PRIMARY KEY (lfn_id, "key"), '
    "FOREIGN KEY(lfn_id) REFERENCES rc_lfn (lfn_id) ON DELETE CASCADE)",
)


class MapError(ValueError):
    pass


def read_map(path: str) -> list[tuple[str, str, str | None, dict[str, str]]]:
    """(lfn, pfn, site, attributes) per line of a pegasus-rc-client map file."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                words = shlex.split(line)
            except ValueError as exc:
                raise MapError(f"{path}:{lineno}: {exc}") from None
            if len(words) < 2:
                raise MapError(f"{path}:{lineno}: expected 'LFN PFN site=\"SITE\"'")
            attrs = dict(w.partition("=")[::2] for w in words[2:])
            site = attrs.pop("site", None) or attrs.pop("pool", None)
            out.append((words[0], words[1], site, attrs))
    return out


def insert(db: str, entries: list[tuple[str, str, str | None, dict[str, str]]]) -> int:
    """Add the entries in one transaction; returns how many copies were new."""
    con = sqlite3.connect(db, timeout=60)
    try:
        with con:
            for statement in SCHEMA:
                con.execute(statement)
            new = 0
            for lfn, pfn, site, attrs in entries:
                con.execute("INSERT OR IGNORE INTO rc_lfn (lfn) VALUES (?)", (lfn,))
                (lfn_id,) = con.execute("SELECT lfn_id FROM rc_lfn WHERE lfn = ?", (lfn,)).fetchone()
                known = con.execute(
                    "SELECT 1 FROM rc_pfn WHERE lfn_id = ? AND pfn = ? AND site IS ?", (lfn_id, pfn, site)
                ).fetchone()
                if known is None:
                    con.execute("INSERT INTO rc_pfn (lfn_id, pfn, site) VALUES (?, ?, ?)", (lfn_id, pfn, site))
                    new += 1
                for key, value in attrs.items():
                    con.execute(
                        'INSERT OR REPLACE INTO rc_meta (lfn_id, "key", value) VALUES (?, ?, ?)', (lfn_id, key, value)
                    )
        return new
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pilot.data.register",
        description='Insert LFN PFN site="SITE" lines into a JDBCRC SQLite replica catalog.',
    )
    p.add_argument("--db", required=True, help="the SQLite file of the output replica catalog (made if missing)")
    p.add_argument("--insert", required=True, metavar="MAPFILE", help='lines \'LFN PFN site="SITE" [key="value" ...]\'')
    ns = p.parse_args(argv)
    try:
        entries = read_map(ns.insert)
        new = insert(ns.db, entries)
    except (OSError, MapError, sqlite3.Error) as exc:
        print(f"pilot.data.register: {exc}", file=sys.stderr)
        return 1
    for lfn, pfn, site, _ in entries:
        print(f"registered {lfn} {pfn} site={site}")
    print(f"{len(entries)} entries, {new} new, in {ns.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
