"""The Textual app. It renders engine events and runs no evaluation itself.

Layout of this package (after harlequin's app / components / messages split):

- ``app.py``: ``CudaL1App`` — startup, global keys, the screen stack, the engine's lifecycle.
- ``screens/session_screen.py``: ``SessionScreen`` — the session's layout, actions and records;
  ``event_rendering.py``: how it shows each engine event (a ``match``, exhaustive under mypy).
- ``runner.py``: owns the engine, serialises its blocking calls (always on worker threads).
- ``engine_port.py``: what the app needs from the engine and the factory that builds it.
- ``messages.py``: Textual messages (engine events arrive from worker threads).
- ``widgets/``: header, error banner, progress strip, variants table, chart, detail tabs.
- ``screens/``: the session screen; modal screens (help, confirm, rounds, settings, export,
  open session).
- ``styles/``: one ``.tcss`` per screen.
- ``diffing.py``, ``code_highlight.py``, ``format.py``: diffs, tree-sitter highlighting, cell texts.

Nothing here imports torch; the engine runs candidates in evaluator subprocesses.
"""
