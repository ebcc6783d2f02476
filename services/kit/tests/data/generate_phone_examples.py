#!/usr/bin/env python3
"""Writes the reference lists that services/kit/tests/phone_examples.rs holds
`PhoneRules::normalise` to, from Python's `phonenumbers` (Google's libphonenumber):

- phone_examples.tsv: libphonenumber's own example numbers, fixed line, mobile and toll-free for
  every supported region, each in E.164, international and national spelling.
- phone_near_misses.tsv: spellings around those examples (dialled from the US with its
  international prefix 011, and with a digit added or dropped), each with libphonenumber's
  reading: the E.164 number, or `refused` where it does not parse or is not a valid number.

Run from the repository root:

    python3 -m venv ~/.cache/switchboard/phonenumbers-venv
    ~/.cache/switchboard/phonenumbers-venv/bin/pip install 'phonenumbers==9.0.*'
    ~/.cache/switchboard/phonenumbers-venv/bin/python services/kit/tests/data/generate_phone_examples.py
"""

import pathlib

import phonenumbers
from phonenumbers import NumberParseException, PhoneNumberFormat, PhoneNumberType

TYPES = [
    ("FIXED_LINE", PhoneNumberType.FIXED_LINE),
    ("MOBILE", PhoneNumberType.MOBILE),
    ("TOLL_FREE", PhoneNumberType.TOLL_FREE),
]

HERE = pathlib.Path(__file__).parent
HEADER = (
    f"# From Python phonenumbers {phonenumbers.__version__} (libphonenumber's metadata), "
    "written by generate_phone_examples.py: do not edit by hand.\n"
)


def examples():
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for name, kind in TYPES:
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                yield region, name, number


def reading(text, region):
    """libphonenumber's E.164 for `text` read in `region`, or `refused`."""
    try:
        number = phonenumbers.parse(text, region)
    except NumberParseException:
        return "refused"
    if not phonenumbers.is_valid_number(number):
        return "refused"
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)


def write(name, columns, rows):
    with (HERE / name).open("w", encoding="utf-8", newline="\n") as out:
        out.write(HEADER)
        out.write("# " + "\t".join(columns) + "\n")
        for row in rows:
            if any("\t" in cell or "\n" in cell for cell in row):
                raise SystemExit(f"a cell holds a tab or a newline: {row}")
            out.write("\t".join(row) + "\n")
    print(f"wrote {len(rows)} rows to {HERE / name}")


def main():
    rows = []
    near_misses = {}
    for region, name, number in examples():
        e164 = phonenumbers.format_number(number, PhoneNumberFormat.E164)
        international = phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)
        national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
        rows.append([region, name, e164, international, national])
        for text, default in [
            ("011 " + international.lstrip("+"), "US"),
            (international + "5", "US"),
            (e164[:-1], "US"),
            (national + "5", region),
            (national[:-1].rstrip(), region),
        ]:
            near_misses[(default, text)] = reading(text, default)
    write("phone_examples.tsv", ["region", "type", "e164", "international", "national"], rows)
    write(
        "phone_near_misses.tsv",
        ["region", "text", "e164 or refused"],
        [[region, text, e164] for (region, text), e164 in sorted(near_misses.items())],
    )


if __name__ == "__main__":
    main()
