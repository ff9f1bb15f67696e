"""Write every example graph (default sizes, before and after the pass pipeline) as JSON."""
from __future__ import annotations

from pathlib import Path

from ..passes import run_pipeline
from . import EXAMPLES


def main() -> None:
    here = Path(__file__).parent / "json"
    here.mkdir(exist_ok=True)
    for name, build in EXAMPLES.items():
        g = build()
        (here / f"{name}.json").write_text(g.to_json())
        (here / f"{name}.passes.json").write_text(run_pipeline(g).to_json())


if __name__ == "__main__":
    main()
