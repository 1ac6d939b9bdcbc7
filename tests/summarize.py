#!/usr/bin/env python3
"""Prints one closing line for meson test runs: 'tests: N passed, N failed, N skipped'.

Reads the testlog.json files meson writes (one per build directory given). A skip (exit 77)
is never counted as a pass; anything that is neither a pass nor a skip is a failure."""
import json
import sys


def main(paths):
    passed = failed = skipped = 0
    for path in paths:
        with open(path) as log:
            for line in log:
                result = json.loads(line)["result"]
                if result == "OK":
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failed += 1
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
