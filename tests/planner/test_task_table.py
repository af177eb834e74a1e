"""The root workflow's task table: built a column at a time for a million jobs, it holds what each task's own
record would (RootTask, one at a time), whatever the jobs carry and wherever a chunk of columns ends."""

from __future__ import annotations

import dataclasses

import pytest

from pilot.contracts.clusters import ClusterKind
from pilot.contracts.rootfiles import RootTask, TaskTable
from pilot.planner import emitroot
from pilot.planner.dagfile import command_text
from pilot.planner.model import Cluster, Job, JobType, Link, Use
from pilot.planner.resolve import Template


def jobs() -> list[Job]:
    plain = [Job(id=f"ID{k}", name="a", args_line=f"-i f.{k}", index=k) for k in range(5)]
    qualified = Job(id="Q1", name="a", namespace="ns", version="1", args_line="x", metadata={"k": "v"}, index=5)
    versioned = Job(id="Q2", name="a", version="2", index=6)
    profiled = Job(id="P1", name="b", profiles={"pegasus": {"pmc_request_memory": "100"}}, index=7)
    data = Job(
        id="create_dir_w_0_local",
        name="dirmanager",
        namespace="pegasus",
        type=JobType.CREATE_DIR,
        command=["pegasus-transfer", "-f", "a b"],
        index=8,
    )
    files = Job(
        id="F1",
        name="c",
        uses=[
            Use(lfn="f.out", link=Link.OUTPUT),
            Use(lfn="f.in", link=Link.INPUT, metadata={"size": "3"}),
            Use(lfn="f.tmp", link=Link.OUTPUT, register=False),
        ],
        index=9,
    )
    out = [data, *plain, qualified, versioned, profiled, files]
    for child in out[1:]:
        data.children.append(child)
        child.parents.append(data)
    for parent, child in ((plain[0], plain[1]), (plain[0], qualified), (plain[1], files), (profiled, files)):
        parent.children.append(child)
        child.parents.append(parent)
    return out


def request_of(job: Job) -> tuple[int, int, int]:
    """As a job's template has it: a job without profiles asks what its transformation asks."""
    return (2 if job.name == "a" else 1, int(job.profiles.get("pegasus", {}).get("pmc_request_memory", 0)), 0)


def template(job: Job) -> Template:
    return Template("local", job.tx_label, None, request_of(job), None, ())


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_the_columns_hold_each_tasks_record(monkeypatch, chunk):
    monkeypatch.setattr(emitroot, "CHUNK", chunk)
    members = jobs()
    data_ids: set[str] = set()
    table = emitroot.task_table(
        Cluster(name="merge_w", jobs=members, kind=ClusterKind.WHOLE, site="local"),
        list(map(template, members)),
        data_ids,
    )
    # the data job is no task, as in a Pegasus plan, whose tasks are the workflow's own jobs
    one_by_one = TaskTable.of(
        RootTask(
            j.id,
            j.tx_label,
            command_text(j),
            tuple(c.id for c in j.children),
            *request_of(j),
            j.type.value,
            j.metadata,
            emitroot._mapped_files(j.uses),
        )
        for j in members[1:]
    )
    for column in (f.name for f in dataclasses.fields(TaskTable)):
        if column != "requests":
            assert getattr(table, column) == getattr(one_by_one, column), column
    assert table.transformations[5:7] == ["ns::a:1", "a:2"] and "create_dir_w_0_local" not in table.ids
    assert data_ids == {"create_dir_w_0_local"}
    # what the data job asks for is asked of the batch job all the same
    assert table.requests == one_by_one.requests | {(1, 0, 0)} == {(2, 0, 0), (1, 100, 0), (1, 0, 0)}
    assert table.files == {8: (("f.out", {}), ("f.in", {"size": "3"}))} and table.metadata == {5: {"k": "v"}}
    assert len(table.edge_parents) == len(table.edge_children) == 4
