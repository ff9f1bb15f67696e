"""Backends shipped with evt, installed under the import name `evt_backends`."""
