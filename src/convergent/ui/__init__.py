"""The web console over the run store (``convergent ui``; the optional extra ``ui``).

Importing this package is cheap: it registers the ``web`` ask channel (`WebChannel`,
which needs only the run store) so that ``ask_via="web"`` works in any process. The
server itself (`convergent.ui.app.create_app`, `convergent.ui.server.serve`) needs
Starlette, uvicorn and Jinja2 (the ``ui`` extra: ``pip install -e '.[ui]'`` in a checkout).
"""

from convergent.ui.channel import WebChannel
from convergent.ui.channel import register as _register

__all__ = ["WebChannel"]

_register()
