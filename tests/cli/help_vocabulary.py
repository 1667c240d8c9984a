#!/usr/bin/env python3
"""Every tool's --help against every other's: a flag that two tools take must be listed by both
with the same names and the same help text (bin/flags.h, the one flag table). What may differ is
the type column (a tool's default, "INT=512"; a list, "TEXT ..."; its range) and the footer.

Usage: help_vocabulary.py <tool> [<tool> ...]   (paths of the built tools)
Exit status 0 when every shared flag agrees, 1 otherwise (each disagreement on a line).
"""
import os
import subprocess
import sys

# CLI11 (Formatter::make_option, detail::format_help) prints an option as "  NAMES OPTS" padded to
# this column, then its help; when "  NAMES OPTS" is this long or longer, the help goes on the next
# line, indented to the column.
COLUMN = 30


def options_of(help_text):
    """{names: help} for every option line of a CLI11 --help ("-n,--n-predict": "Tokens ...")."""
    lines = help_text.splitlines()
    options = {}
    for i, line in enumerate(lines):
        if not line.startswith("  -"):
            continue
        following = []
        for later in lines[i + 1:]:
            if not later.startswith(" " * COLUMN) or not later.strip():
                break
            following.append(later.strip())
        # The help begins on this line only when the names and type fit before the column (no
        # help text of the tools holds a line break, so a following indented line is the help).
        if following and len(line.rstrip()) >= COLUMN:
            head, help_text_of = line.strip(), " ".join(following)
        else:
            head = line[:COLUMN].strip()
            help_text_of = " ".join([line[COLUMN:].strip()] + following).strip()
        options[head.split()[0]] = help_text_of
    return options


def main(tools):
    if not tools:
        print(__doc__)
        return 2
    by_name = {}  # a flag name -> [(tool, all its names, help)]
    for tool in tools:
        name = os.path.basename(tool)
        run = subprocess.run([tool, "--help"], capture_output=True, text=True, check=False)
        if run.returncode != 0:
            print(f"FAIL {name} --help: exit {run.returncode}: {run.stderr.strip()}")
            return 1
        options = options_of(run.stdout)
        if "-h,--help" not in options or len(options) < 3:
            print(f"FAIL {name} --help: {len(options)} options read; is this CLI11's layout?")
            return 1
        for names, text in options.items():
            for flag in names.split(","):
                by_name.setdefault(flag, []).append((name, names, text))

    failures = 0
    shared = 0
    for flag, uses in sorted(by_name.items()):
        if len({tool for tool, _, _ in uses}) < 2 or flag in ("-h", "--help"):
            continue
        shared += 1
        first_tool, first_names, first_help = uses[0]
        for tool, names, text in uses[1:]:
            if names != first_names:
                failures += 1
                print(f"FAIL {flag}: {first_tool} spells it '{first_names}', {tool} '{names}'")
            elif text != first_help:
                failures += 1
                print(f"FAIL {flag}: {first_tool} says '{first_help}', {tool} '{text}'")
    print(f"{shared} flag names in more than one of {len(tools)} tools; {failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
