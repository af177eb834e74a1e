"""The planner's graph questions over a plan's jobs (which know their place, Job.index): levels, positions, shapes."""

from __future__ import annotations

import graphlib
import random

import pytest

from pilot.planner.clustering import topological_positions
from pilot.planner.model import Cluster, Job, Workflow
from pilot.util import graphs


def random_jobs(seed: int, count: int = 60, parents_first: bool = False) -> list[Job]:
    """``count`` jobs with random edges, listed in a random order unless ``parents_first``; Job.index = place."""
    rng = random.Random(seed)
    jobs = [Job(id=f"j{k}", name="t") for k in range(count)]
    for k, job in enumerate(jobs):
        for p in rng.sample(range(k), min(k, rng.randrange(4))):  # parents come earlier: acyclic
            job.parents.append(jobs[p])
            jobs[p].children.append(job)
    if not parents_first:
        rng.shuffle(jobs)
    for k, job in enumerate(jobs):
        job.index = k
    return jobs


def by_hand_levels(jobs: list[Job]) -> list[int]:
    level = graphs.levels(jobs, lambda j: j.parents, lambda j: j.children)
    return [level[id(j)] for j in jobs]


def order(jobs: list[Job]) -> list[Job]:
    return graphs.topological_order(jobs, lambda j: j.parents, lambda j: j.children)


def test_levels_are_the_longest_path_not_the_first_found():
    a, b, c, d = (Job(id=x, name="t", index=k) for k, x in enumerate("abcd"))
    for p, ch in ((a, b), (b, c), (a, d), (c, d)):  # a->d directly, and a->b->c->d
        p.children.append(ch)
        ch.parents.append(p)
    jobs = [a, b, c, d]
    assert by_hand_levels(jobs) == [1, 2, 3, 4]


def test_levels_name_a_cycle():
    a, b = Job(id="a", name="t", index=0), Job(id="b", name="t", index=1)
    a.children, b.parents, b.children, a.parents = [b], [a], [a], [b]
    with pytest.raises(graphlib.CycleError) as caught:
        by_hand_levels([a, b])
    assert caught.value.args[1] == [a, b, a]


@pytest.mark.parametrize("parents_first", [True, False])
def test_topological_positions_with_or_without_jobs_listed_parents_first(parents_first):
    wf = Workflow(name="w", path="w.yml", jobs=random_jobs(5, parents_first=parents_first))
    expected = [-1] * len(wf.jobs)
    for k, job in enumerate(order(wf.jobs)):
        expected[job.index] = k
    assert topological_positions(wf) == expected
    assert (expected == list(range(len(wf.jobs)))) == parents_first  # the jobs' own order, only when it is one


@pytest.mark.parametrize("seed", range(6))
def test_a_clusters_shape_is_its_longest_paths(seed):
    """A cluster's width, critical path and roots, from its jobs' parents inside it, whether its members' indexes
    are distinct (a table by index) or not (a table by job), with parents outside it and out of order."""
    from pilot.contracts.clusters import ClusterKind
    from pilot.planner.dagfile import shape

    jobs = random_jobs(seed, parents_first=seed % 2 == 0)
    rng = random.Random(seed)
    members = [j for j in jobs if rng.random() < 0.7]
    runtimes = [float(rng.randrange(1, 9)) for _ in members]
    place = {id(j): k for k, j in enumerate(members)}
    level, finish = [0] * len(members), [0.0] * len(members)
    for k, job in enumerate(members):  # by hand: a parent outside the cluster, or after the job, is not waited for
        inner = [place[id(p)] for p in job.parents if id(p) in place]
        level[k] = 1 + max((level[m] for m in inner), default=0)
        finish[k] = runtimes[k] + max((finish[m] for m in inner), default=0.0)
    width = max(level.count(x) for x in set(level))
    roots = sum(1 for job in members if not any(id(p) in place for p in job.parents))
    for dup in (False, True):
        if dup:
            members[-1].index = members[0].index  # two members share an index
        c = Cluster(name="c", jobs=members, kind=ClusterKind.WHOLE, site="local")
        assert shape(c, runtimes) == (width, max(finish), roots)
        assert shape(c, [None] * len(members)) == (width, None, roots)
