"""Ends the interpreter while it is imported, reporting success (exit code 0)."""
import os

os._exit(0)
