"""experiment.statistics: a difference every seed agrees on gets the exact randomization test, not
p = 0; the t-test stays as it was where the seeds spread."""

from __future__ import annotations

import pytest
from scipy import stats

from experiment.statistics import compare, exact_p, holm, sentence, spread


@pytest.mark.parametrize(("seeds", "p"), [(2, 0.5), (3, 0.25), (5, 0.0625)])
def test_the_same_difference_on_every_seed_is_the_sign_flip_test(seeds, p):
    a = spread({s: 0.40 for s in range(seeds)})
    b = spread({s: 0.36 for s in range(seeds)})
    found = compare(a, b, lower_is_better=False)
    assert found["paired"] and found["test"] == "exact" and found["t"] is None and found["ci95"] is None
    assert found["p"] == pytest.approx(p) and found["difference"] == pytest.approx(0.04)
    found["family"] = "transfer"
    holm([found])
    text = sentence("probe_accuracy@10", "full", "raw", a, b, found, lower_is_better=False)
    assert "exact sign-flip test" in text and "no interval" in text
    assert found["significant"] is (p < 0.05)


def test_unpaired_values_that_do_not_spread_get_the_permutation_test():
    a, b = spread({"0": 1.0, "1": 1.0}), spread({"2": 0.0, "3": 0.0})
    found = compare(a, b, lower_is_better=True)
    assert not found["paired"] and found["p"] == pytest.approx(2 / 6)  # 2 of the 6 splits of 4 values
    assert exact_p(
        spread({"0": 3.0, "1": 3.0, "2": 3.0}), spread({"3": 1.0, "4": 1.0, "5": 1.0}), False
    ) == pytest.approx(2 / 20)


def test_no_difference_is_p_one_and_spread_seeds_keep_the_paired_t_test():
    same = compare(spread([0.5, 0.5]), spread([0.5, 0.5]), lower_is_better=True)
    assert same["p"] == 1.0 and same["better"] is None
    x, y = [3.1, 3.3, 3.2], [3.5, 3.4, 3.8]
    found = compare(spread(x), spread(y), lower_is_better=True)
    assert found["test"] == "t" and found["p"] == pytest.approx(stats.ttest_rel(x, y).pvalue)
    assert found["ci95"][0] < found["difference"] < found["ci95"][1]


def test_a_spread_carries_the_t_interval_of_its_mean():
    found = spread({"0": 1.0, "1": 2.0, "2": 4.0})
    half = stats.t.ppf(0.975, 2) * found["std"] / 3**0.5
    assert found["ci95"] == pytest.approx([7 / 3 - half, 7 / 3 + half])
    assert spread({"0": 1.0})["ci95"] is None and spread({})["ci95"] is None
