"""passkey_swar: retain a passkey indefinitely while forgetting stale key-value bindings.

One package, one concept: `generator` builds the examples (plain-Python reference and a
vectorised twin), `oracle` re-derives every label from the tokens alone, `card` measures the
statistics and renders the card, `check` validates a release folder, `release` writes the
Hugging Face layout (and is what the workflow drives), `task` is the training/evaluation
adapter, and `__main__` the command line
(``python -m arbench.tasks.passkey_swar``).
"""

from arbench.tasks.passkey_swar.task import PasskeySwarTask

__all__ = ["PasskeySwarTask"]
