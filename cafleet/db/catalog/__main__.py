"""`python -m cafleet.db.catalog --write | --check` (docs/storage.md §7.11)."""

from __future__ import annotations

import argparse
import sys

from cafleet.db.catalog.build import check, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cafleet.db.catalog")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="regenerate the catalog modules")
    group.add_argument("--check", action="store_true", help="fail when a module is stale")
    args = parser.parse_args(argv)
    if args.write:
        for path in write():
            print(f"wrote {path}")
        return 0
    stale = check()
    for path in stale:
        print(f"stale: {path} (run: python -m cafleet.db.catalog --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
