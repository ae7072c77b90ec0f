"""Evaluations on a Ray cluster (``pip install 'cudal1-tui[ray]'``): see ``ray_backend``."""
