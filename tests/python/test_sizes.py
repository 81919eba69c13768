"""The size-spec grammar (same as the C harness's mln_size_list_parse)."""

from __future__ import annotations

import pytest

from multilane.sizes import MAX_BYTES, SizeSpecError, format_size, parse_size, parse_size_spec

K, M, G = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1:8", [1, 2, 4, 8]),
        ("1:64M", [1 << e for e in range(27)]),
        ("0:4", [0, 1, 2, 4]),
        ("3:20", [3, 6, 12]),
        ("5:5", [5]),
        ("0,1,4K", [0, 1, 4 * K]),
        ("4K,1,0", [0, 1, 4 * K]),
        ("1,1,2", [1, 2]),
        ("0:4,3,4", [0, 1, 2, 3, 4]),
        ("4k", [4 * K]),
        ("4KB", [4 * K]),
        ("4KiB", [4 * K]),
        ("4kib", [4 * K]),
        ("16B", [16]),
        ("8KiB:16KB", [8 * K, 16 * K]),
        (" 1M ", [M]),
        ("1G", [G]),
        (str(MAX_BYTES), [MAX_BYTES]),
        ("1000,65537", [1000, 65537]),
    ],
)
def test_good_specs(spec: str, expected: list[int]) -> None:
    assert parse_size_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("abc", "invalid size 'abc'"),
        ("", "empty size list"),
        (",1", "invalid size ''"),
        ("1,", "invalid size ''"),
        ("4 K", "invalid size"),
        ("4iB", "invalid size"),
        ("-1", "invalid size"),
        ("+1", "invalid size"),
        ("1.5K", "invalid size"),
        ("4X", "invalid size"),
        ("1:2:3", "invalid range"),
        ("1:", "invalid range"),
        (":8", "invalid range"),
        ("8:1", "lower bound is above the upper bound"),
        ("2G", "above the largest MPI message"),
        ("1T", "above the largest MPI message"),
        ("1:4G", "goes above the largest MPI message"),
        (",".join(["0:1G"] * 40), "more than 1024 message sizes"),
    ],
)
def test_bad_specs(spec: str, fragment: str) -> None:
    with pytest.raises(SizeSpecError) as info:
        parse_size_spec(spec)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(f"invalid size spec '{spec}'")
    assert "\n" not in message


def test_bad_spec_says_what_is_expected() -> None:
    with pytest.raises(SizeSpecError, match=r"expected e\.g\. 1:64M"):
        parse_size_spec("abc")


def test_parse_size() -> None:
    assert parse_size("0") == 0
    assert parse_size("64M") == 64 * M
    with pytest.raises(SizeSpecError):
        parse_size("64Q")


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [(0, "0"), (1, "1"), (1000, "1000"), (1024, "1K"), (1536, "1536"), (64 * M, "64M"),
     (G, "1G"), (65537, "65537")],
)  # fmt: skip
def test_format_size(nbytes: int, text: str) -> None:
    assert format_size(nbytes) == text
