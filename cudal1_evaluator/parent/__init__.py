"""The parent's side of an evaluation (stdlib only, torch-free): schedule, clock and verdict."""
