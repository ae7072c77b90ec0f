"""The command palette (``ctrl+p``): every app action, searchable by name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Provider

from cudal1_tui.ui.actions import ACTIONS, Action, key_label

if TYPE_CHECKING:
    from cudal1_tui.ui.app import CudaL1App


class ActionsProvider(Provider):
    """One hit per entry of ``ACTIONS``, named with its current key."""

    def _app(self) -> CudaL1App:
        from cudal1_tui.ui.app import CudaL1App

        app = self.app
        assert isinstance(app, CudaL1App)
        return app

    def _title(self, action: Action) -> str:
        key = self._app().key_of(action.binding_id)
        return f"{action.text} ({key_label(key)})" if key else action.text

    async def _run(self, action: Action) -> None:
        app = self._app()
        namespace = app.session if action.scope == "session" else app
        await app.run_action(action.action, default_namespace=namespace)

    async def discover(self) -> AsyncIterator[DiscoveryHit]:
        for action in ACTIONS:
            yield DiscoveryHit(self._title(action), partial(self._run, action), help=action.help)

    async def search(self, query: str) -> AsyncIterator[Hit]:
        matcher = self.matcher(query)
        for action in ACTIONS:
            title = self._title(action)
            score = max(matcher.match(title), matcher.match(action.help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, action),
                          help=action.help)
