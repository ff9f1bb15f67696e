"""Package discovery that pyproject alone cannot express: every package under backends/ is
installed as evt_backends.<name> (see package-dir in pyproject.toml)."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["evt_core", "evt_core.*"])
      + ["evt_backends" + p[len("backends"):] for p in find_packages(include=["backends", "backends.*"])])
