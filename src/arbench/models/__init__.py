"""Models built from a cell name and a state/parameter budget."""

from arbench.models.lm import LanguageModel, ModelConfig, build_model

__all__ = ["LanguageModel", "ModelConfig", "build_model"]
