"""Model backends behind one seam, `Model.request` (and `Model.request_stream`).

Each backend is imported when its name is first used (PEP 562): a module that needs only
the seam (`convergent.models.base`) or the prices (`convergent.models._prices`) loads no
HTTP client and no embedded model server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convergent._exports import listed_names as _listed_names
from convergent._exports import load_export as _load_export

if TYPE_CHECKING:
    from convergent.models._prices import TokenPrice as TokenPrice
    from convergent.models.anthropic import AnthropicModel as AnthropicModel
    from convergent.models.base import Model as Model
    from convergent.models.base import ModelSettings as ModelSettings
    from convergent.models.base import StreamPart as StreamPart
    from convergent.models.base import TextChunk as TextChunk
    from convergent.models.base import ToolCallChunk as ToolCallChunk
    from convergent.models.local import LocalModel as LocalModel
    from convergent.models.openai import OpenAIChatModel as OpenAIChatModel
    from convergent.models.registry import default_model_spec as default_model_spec
    from convergent.models.registry import model_from_string as model_from_string
    from convergent.models.scripted import ScriptedModel as ScriptedModel
    from convergent.models.scripted import response_from_dict as response_from_dict
    from convergent.models.structured import StructuredToolCalling as StructuredToolCalling

_MODULE_OF = {
    "TokenPrice": "convergent.models._prices",
    "AnthropicModel": "convergent.models.anthropic",
    "Model": "convergent.models.base",
    "ModelSettings": "convergent.models.base",
    "StreamPart": "convergent.models.base",
    "TextChunk": "convergent.models.base",
    "ToolCallChunk": "convergent.models.base",
    "LocalModel": "convergent.models.local",
    "OpenAIChatModel": "convergent.models.openai",
    "default_model_spec": "convergent.models.registry",
    "model_from_string": "convergent.models.registry",
    "ScriptedModel": "convergent.models.scripted",
    "response_from_dict": "convergent.models.scripted",
    "StructuredToolCalling": "convergent.models.structured",
}
"""The module that defines each exported name, imported when the name is first used."""

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> object:
    """Import an exported name's module when the name is first used (PEP 562)."""
    return _load_export(globals(), _MODULE_OF, name)


def __dir__() -> list[str]:
    """The names already imported and the exported ones not yet used."""
    return _listed_names(globals(), __all__)
