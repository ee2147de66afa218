"""Parsing quantities at the edges: suffixes, bytes vs bits, IEC vs SI, and one-line errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trilemma.errors import InputError
from trilemma.units import (
    DAY,
    HOUR,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_usd,
    parse_bandwidth,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_usd,
)

REL = 1e-12


@pytest.mark.parametrize(
    "text, expected",
    [
        ("7B", 7e9),
        ("2T", 2e12),
        ("1.5e12", 1.5e12),
        ("4,000,000", 4e6),
        ("1,234.5M", 1.2345e9),
        ("250k", 250e3),
        ("350M", 350e6),
        ("7G", 7e9),
        ("1P", 1e15),
        (" 7B ", 7e9),
        ("4_000_000", 4e6),
        (".5k", 500.0),
        ("5.", 5.0),
        ("2048", 2048.0),
        (2048, 2048.0),
        (1.5e12, 1.5e12),
    ],
)
def test_parse_count(text, expected):
    assert parse_count(text) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("80GiB", 80 * 2**30),
        ("80GB", 80e9),
        ("512MiB", 512 * 2**20),
        ("1TiB", 2**40),
        ("1kiB", 2**10),  # lowercase k with the IEC i: still kibibytes, not a crash
        ("80G", 80e9),
        ("1.5e9", 1.5e9),
        ("85899345920", 85899345920.0),
        ("80 GiB", 80 * 2**30),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("150GB/s", 1.5e11),
        ("800Gb/s", 1e11),  # bits: lowercase b
        ("400Gbps", 5e10),
        ("450GBps", 4.5e11),
        ("2.5e10", 2.5e10),  # bare number: bytes/s
        ("1,000GB/s", 1e12),
        ("1GiB/s", 2**30),
        ("8Gib/s", 2**30),
        ("150 GB/s", 1.5e11),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("30d", 30 * 86400),
        ("12h", 12 * 3600),
        ("90min", 90 * 60),
        ("2w", 14 * 86400),
        ("3600", 3600.0),
        ("1.5h", 5400.0),
        ("2 days", 2 * 86400),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("$1.5M", 1.5e6),
        ("250k", 250e3),
        ("$250k", 250e3),
        ("2.10", 2.10),
        ("$1,500,000", 1.5e6),
        ("1.5 USD", 1.5),
        ("0", 0.0),  # money may be zero (an owned cluster); counts may not
    ],
)
def test_parse_usd(text, expected):
    assert parse_usd(text) == pytest.approx(expected, rel=REL)


PARSERS = [parse_count, parse_bytes, parse_bandwidth, parse_duration, parse_usd]
BAD = ["2Tx", "-3", "nan", "inf", "", "   ", "NaN", "1e400", "abc", "7 B B", "1,5T", "12,345,6"]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("text", BAD)
def test_rejects_with_field_and_value(parser, text):
    with pytest.raises(InputError) as info:
        parser(text, field="my-field")
    err = info.value
    assert err.field == "my-field"
    assert err.value == text
    msg = str(err)
    assert "my-field" in msg and repr(text) in msg
    assert "\n" not in msg
    assert isinstance(err, ValueError)  # callers may catch ValueError


@pytest.mark.parametrize(
    "parser", [parse_count, parse_bytes, parse_bandwidth, parse_duration], ids=lambda f: f.__name__
)
@pytest.mark.parametrize(
    "value", ["0", "0.0", "0B", 0, 0.0, -1, float("nan"), float("inf"), "1e-400"]
)
def test_rejects_zero_negative_nonfinite(parser, value):
    if value == "0B" and parser is not parse_bytes and parser is not parse_count:
        value = "0"
    with pytest.raises(InputError) as info:
        parser(value, field="f")
    assert info.value.field == "f"


@pytest.mark.parametrize("value", [-1, "-1", "$-1", float("nan"), float("inf")])
def test_usd_rejects_negative_and_nonfinite(value):
    with pytest.raises(InputError):
        parse_usd(value, field="price")


def test_bool_is_not_a_number():
    with pytest.raises(InputError):
        parse_count(True, field="gpus")


def test_default_field_names():
    for parser, field in [
        (parse_count, "count"),
        (parse_bytes, "bytes"),
        (parse_bandwidth, "bandwidth"),
        (parse_duration, "duration"),
        (parse_usd, "usd"),
    ]:
        with pytest.raises(InputError, match=f"^{field}: 'x'"):
            parser("x")


# ------------------------------------------------------------------ properties

positive = st.floats(min_value=1e-300, max_value=1e200, allow_nan=False, allow_infinity=False)

COUNT_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
BYTES_SUFFIX = {
    "B": 1.0,
    "kB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
    "TiB": 2.0**40,
}
BW_SUFFIX = {
    "B/s": 1.0,
    "GB/s": 1e9,
    "Gb/s": 1e9 / 8,
    "Gbps": 1e9 / 8,
    "MB/s": 1e6,
    "Tb/s": 1e12 / 8,
    "GiB/s": 2.0**30,
}
DUR_SUFFIX = {"": 1.0, "s": 1.0, "min": 60.0, "h": HOUR, "d": DAY, "w": 7 * DAY}


@given(positive, st.sampled_from(sorted(COUNT_SUFFIX)))
def test_count_roundtrip(x, suffix):
    assert parse_count(f"{x}{suffix}") == pytest.approx(x * COUNT_SUFFIX[suffix], rel=1e-12)


@given(positive)
def test_count_T(x):
    assert math.isclose(parse_count(f"{x}T"), x * 1e12, rel_tol=1e-12)


@given(positive, st.sampled_from(sorted(BYTES_SUFFIX)))
def test_bytes_roundtrip(x, suffix):
    assert parse_bytes(f"{x}{suffix}") == pytest.approx(x * BYTES_SUFFIX[suffix], rel=1e-12)


@given(positive, st.sampled_from(sorted(BW_SUFFIX)))
def test_bandwidth_roundtrip(x, suffix):
    assert parse_bandwidth(f"{x}{suffix}") == pytest.approx(x * BW_SUFFIX[suffix], rel=1e-12)


@given(positive)
def test_bits_are_an_eighth_of_bytes(x):
    assert parse_bandwidth(f"{x}Gb/s") == pytest.approx(parse_bandwidth(f"{x}GB/s") / 8, rel=1e-12)
    assert parse_bandwidth(f"{x}Gbps") == parse_bandwidth(f"{x}Gb/s")


@given(positive, st.sampled_from(sorted(DUR_SUFFIX)))
def test_duration_roundtrip(x, suffix):
    assert parse_duration(f"{x}{suffix}") == pytest.approx(x * DUR_SUFFIX[suffix], rel=1e-12)


@given(st.floats(min_value=0, max_value=1e200, allow_nan=False), st.sampled_from(["", "k", "M"]))
def test_usd_roundtrip(x, suffix):
    scale = {"": 1.0, "k": 1e3, "M": 1e6}[suffix]
    assert parse_usd(f"${x}{suffix}") == pytest.approx(x * scale, rel=1e-12)


@given(st.integers(min_value=1, max_value=10**15))
def test_thousands_separators(n):
    assert parse_count(f"{n:,}") == float(n)
    assert parse_count(f"{n:_}") == float(n)


@given(positive)
def test_numbers_pass_through(x):
    for parser in (parse_count, parse_bytes, parse_bandwidth, parse_duration, parse_usd):
        assert parser(x) == x


# ------------------------------------------------------------------ formatting (smoke)


def test_formatting():
    assert fmt_count(7e9) == "7B"
    assert fmt_bytes(80 * 2**30) == "80 GiB"
    assert (
        fmt_bytes(5.05e-06) == "0 B"
        and fmt_bytes(512.4) == "512 B"
        and fmt_bytes(1536) == "1.5 KiB"
    )
    assert fmt_duration(30 * DAY) == "30.0 days"
    assert fmt_duration(0.5) == "500.0 ms"
    assert fmt_usd(1.5e6) == "$1.50M"
    assert fmt_usd(250e3) == "$250k"


def test_fmt_power_picks_the_unit_a_person_reads():
    """A frontier run in MW, a node-sized job in kW (22.98 MW is Llama 3.1 405B's 16,384 H100s with hosts)."""
    from trilemma.units import fmt_power

    assert fmt_power(22_980_000.0) == "22.98 MW"
    assert fmt_power(8_580.0) == "8.58 kW"
    assert fmt_power(575.0) == "575 W"


def test_co2_in_tonnes_from_100_kg_and_in_kg_below():
    from trilemma.units import fmt_co2_kg

    assert fmt_co2_kg(90_100.0) == "90.1 t"
    assert fmt_co2_kg(100.0) == "0.1 t"
    assert fmt_co2_kg(0.5397) == "0.54 kg"
    assert fmt_co2_kg(60.0, scale_kg=250.0) == "0.1 t"  # a band's end in its point's unit
