"""The "numpy" backend: the reference interpreter behind the plugin interface."""
