"""One GPU for the model server and the timing: which GPUs the server uses, and room left.

``smi`` asks ``nvidia-smi``; ``listeners`` reads ``/proc`` for the process that serves a
port; ``server_gpus`` puts them together; ``memory`` checks the room an evaluation needs.
"""
