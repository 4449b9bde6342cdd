"""Units handed over in blocks (pipeline.stages.units.in_blocks): results in the jobs' order, one
unit per block of at most ``per_block`` jobs, nothing handed over for no jobs."""

from __future__ import annotations

from pipeline.stages.units import blocks, in_blocks, in_process


def test_in_blocks_keeps_the_order_and_hands_over_one_unit_per_block():
    handed: list[int] = []

    def recording(label, fn, jobs):
        handed.append(len(jobs))
        assert label == "squares"
        return in_process(label, fn, jobs)

    jobs = list(range(35))
    assert in_blocks(recording, "squares", lambda n: n * n, jobs, per_block=16) == [n * n for n in range(35)]
    assert handed == [3]  # 35 jobs: three blocks of 11, 12 and 12
    handed.clear()
    assert in_blocks(recording, "squares", lambda n: n, [], per_block=16) == [] and handed == [0]


def test_blocks_are_consecutive_and_cover_every_item():
    for items, units in [(10, 3), (3, 10), (1, 1), (100, 7)]:
        found = blocks(items, units)
        assert [i for block in found for i in block] == list(range(items))
        assert len(found) == min(items, units) and max(map(len, found)) - min(map(len, found)) <= 1
    assert blocks(0, 4) == []
