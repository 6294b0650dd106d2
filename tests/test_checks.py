"""The shared argument checks and the relative-error helper."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core._checks import check_bool, check_int, rel_error


def test_check_bool_refuses_ints_and_numpy_bools() -> None:
    assert check_bool("flag", True) is True
    for bad in (1, 0, np.bool_(True), "yes"):
        with pytest.raises(ValueError, match="flag must be a bool"):
            check_bool("flag", bad)


def test_check_int_names_range() -> None:
    assert check_int("n", np.int64(3), 1, 5) == 3
    with pytest.raises(ValueError, match=r"n must be in \[1, 5\], got 6"):
        check_int("n", 6, 1, 5)
    with pytest.raises(ValueError, match="n must be an integer"):
        check_int("n", True, 1, 5)


def test_rel_error_relative_and_absolute_at_zero() -> None:
    ref = np.array([3.0, 4.0])  # norm 5
    assert rel_error(ref + np.array([0.0, 1.0]), ref) == pytest.approx(0.2)
    assert rel_error(np.array([3.0, 4.0]), np.zeros(2)) == pytest.approx(5.0)
    assert rel_error(ref, ref) == 0.0


def test_check_int_without_upper_bound_and_numpy_integers() -> None:
    big = 1 << 70
    assert check_int("n", big, 1) is big  # a plain int in range: returned as is
    assert check_int("n", np.int32(7), 0) == 7 and type(check_int("n", np.int32(7), 0)) is int
    with pytest.raises(ValueError, match=r"n must be >= 1, got 0"):
        check_int("n", 0, 1)
    with pytest.raises(ValueError, match=r"n must be an integer >= 0, got 2.0"):
        check_int("n", 2.0, 0)
    with pytest.raises(ValueError, match=r"n must be an integer in \[0, 3\], got '1'"):
        check_int("n", "1", 0, 3)
