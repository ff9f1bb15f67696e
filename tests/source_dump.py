"""The command line both backends' dump_sources.py scripts share: write every generated source
as one JSON file (name -> text) and, with --compare OLD, print what differs from an earlier dump
(exit status 1 where a source changed or went missing), so a refactor can be shown to leave the
generated kernels byte-identical."""
import argparse
import difflib
import hashlib
import json
import sys


def main(sources, description):
    """`sources()` -> {name: source text}; `description` heads --help."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("out", help="JSON file to write (name -> source text)")
    ap.add_argument("--compare", metavar="OLD", help="a JSON file of an earlier run: print what differs")
    args = ap.parse_args()
    out = sources()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(len(out), "sources, sha256", hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest())
    if args.compare:
        with open(args.compare) as f:
            old = json.load(f)
        changed = sorted(k for k in out.keys() & old.keys() if out[k] != old[k])
        print(f"{len(out.keys() & old.keys()) - len(changed)} identical, {len(changed)} differ, "
              f"{len(old.keys() - out.keys())} only in {args.compare}, {len(out.keys() - old.keys())} only here")
        for k in changed:
            print(f"--- {k}")
            sys.stdout.writelines(difflib.unified_diff(old[k].splitlines(True), out[k].splitlines(True), n=0))
        sys.exit(1 if changed or old.keys() - out.keys() else 0)
