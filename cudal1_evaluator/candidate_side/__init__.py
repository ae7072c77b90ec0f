"""What runs in the candidate's own process: the worker, the build child and the guard."""
