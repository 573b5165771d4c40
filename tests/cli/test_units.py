import pytest

from occtune.errors import UserError
from occtune.units import format_size, parse_int_list, parse_size, parse_size_list


@pytest.mark.parametrize("text", ["40960", "40K", "40KB", "40KiB", "40k", "40kib", " 40 KB "])
def test_forty_kib_spellings(text):
    assert parse_size(text) == 40960


def test_megabytes_and_ints():
    assert parse_size("2M") == 2 * 1024 * 1024
    assert parse_size(7168) == 7168


@pytest.mark.parametrize("bad", ["", "forty", "40KK", "-5", "4.5K", "40 Q", "K"])
def test_unparsable_sizes_raise_user_error(bad):
    with pytest.raises(UserError, match="byte size"):
        parse_size(bad, "--dynamic-lds")


def test_lists():
    assert parse_size_list("32K,40K,48K,128K") == [32768, 40960, 49152, 131072]
    assert parse_int_list("8, 16,32") == [8, 16, 32]
    with pytest.raises(UserError):
        parse_int_list("8,x")
    with pytest.raises(UserError):
        parse_size_list(",")


def test_format_size():
    assert format_size(40960) == "40 KiB"
    assert format_size(7000) == "7000 B"
