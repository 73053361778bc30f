"""Renderers: each reads result objects and writes them; none computes anything."""
