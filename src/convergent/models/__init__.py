"""Model backends behind one seam, `Model.request`."""

from convergent.models._prices import TokenPrice
from convergent.models.anthropic import AnthropicModel
from convergent.models.base import Model, ModelSettings
from convergent.models.local import LocalModel
from convergent.models.openai import OpenAIChatModel
from convergent.models.registry import default_model_spec, model_from_string
from convergent.models.scripted import ScriptedModel, response_from_dict
from convergent.models.structured import StructuredToolCalling

__all__ = [
    "AnthropicModel",
    "LocalModel",
    "Model",
    "ModelSettings",
    "OpenAIChatModel",
    "ScriptedModel",
    "StructuredToolCalling",
    "TokenPrice",
    "default_model_spec",
    "model_from_string",
    "response_from_dict",
]
