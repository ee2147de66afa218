"""The best fit chosen in hindsight (trilemma.quality.hindsight): the nearest member by hand, the forms
on the non-embedding count recovering an exact law on that count, and the column never worse than any
member it chooses from, the plain fit included."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.quality.hindsight import best_member, nonembedding_predictions
from trilemma.validate.quality import section


def test_best_member_is_the_lowest_median_error_by_hand():
    # losses 2.0 and 2.0; member a misses by 5% and 0% (median 2.5%), b by 5% and 2.5% (median 3.75%)
    name, err = best_member({"a": [2.1, 2.0], "b": [1.9, 2.05]}, [2.0, 2.0])
    assert name == "a"
    assert err == pytest.approx(0.025)
    # a tie goes to the first listed
    assert best_member({"x": [2.5], "y": [1.5]}, [2.0])[0] == "x"  # both 25%, exact in binary


def test_nonembedding_forms_recover_a_law_in_the_non_embedding_count(exact_law):
    # Hoffmann et al.'s law drawn in the non-embedding count: the free form on that count extrapolates
    # it to 10x the compute, under the pool's member names
    x = exact_law
    p = nonembedding_predictions(x.n, x.d, x.loss, x.n_at, x.d_at)
    assert set(p) == {"free (non-embedding)", "tied (non-embedding)", "literature (non-embedding)"}
    assert p["free (non-embedding)"][0] == pytest.approx(x.truth[0], rel=1e-3)
    # constants given are used as they are: a law of E alone predicts E
    flat = {"E": 2.0, "A": 0.0, "B": 0.0, "alpha": 0.3, "beta": 0.3}
    given = nonembedding_predictions(
        x.n, x.d, x.loss, x.n_at, x.d_at, {"free (non-embedding)": flat}
    )
    assert given["free (non-embedding)"][0] == pytest.approx(2.0)


def test_validate_hindsight_is_no_worse_than_any_form_it_chooses_from():
    q = section()
    done = [s for s in q["loss_suites"] if "skipped" not in s]
    for s in done:
        y = np.asarray(s["held_out_loss"])
        for p in s["form_predictions"].values():
            own = float(np.median(np.abs(np.asarray(p) / y - 1.0)))
            assert s["hindsight"]["median"] <= own + 1e-12
        # the plain fit is the free form on total N, fitted on the same runs by the same procedure
        assert s["hindsight"]["median"] <= s["plain"]["median"] + 1e-9
    assert q["hindsight_median_abs_rel_error"] == pytest.approx(
        float(np.median([s["hindsight"]["median"] for s in done]))
    )
