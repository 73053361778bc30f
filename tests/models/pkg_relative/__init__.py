"""A package of model files: net.py imports its neighbour relatively."""
