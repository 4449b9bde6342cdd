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


def test_short_units_over_small_shards_go_in_blocks_of_block_docs_documents(tmp_path):
    import polars as pl

    from pipeline.stages.tokenize import draw_sample
    from pipeline.stages.units import BLOCK_DOCS, JOBS_PER_BLOCK, jobs_per_block

    assert (BLOCK_DOCS, JOBS_PER_BLOCK) == (50_000, 16)
    assert jobs_per_block(74_503, 110) == 74  # the million-document demo after dedup: 677 a shard
    assert jobs_per_block(1_000_000, 110) == 16  # 9,091 a shard: 16 of them hold more
    assert jobs_per_block(0, 3) == jobs_per_block(5, 0) == 16
    # The tokenizer's sample over 40 shards of 50 documents: one unit per pass, not three.
    paths = []
    for s in range(40):
        ids = [f"doc-{s:02d}-{i:02d}" for i in range(50)]
        paths.append(tmp_path / f"docs-{s:02d}.parquet")
        pl.DataFrame({"id": ids, "text": [f"text of {i}" for i in ids]}).write_parquet(paths[-1])
    handed: list[int] = []

    def recording(label, fn, jobs):
        handed.append(sum(len(block.jobs) for block in jobs))
        handed.append(len(jobs))
        return in_process(label, fn, jobs)

    assert draw_sample(paths, 100, 2000, 1, recording).height == 100
    assert handed == [40, 1, 40, 1]
