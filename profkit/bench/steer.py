"""Run an op with a chosen (runner, tactic): a ``choose_one`` hook that exists only inside verify.

``profkit verify`` re-times the tuner's candidates the way an engine runs the op. To run one given
candidate it calls the op's own public API (``flashinfer.bmm_fp8``, ``flashinfer.mm_bf16``) while
:class:`Steering` is open and aimed at that candidate: ``AutoTuner.choose_one`` then returns the
runner of that class from the op's own runner list, with the given tactic, instead of searching
FlashInfer's cache. Everything else (tensor preparation, the runner's forward, the kernel) is
FlashInfer's own code. Calls for other ops, and all calls while the steering is not aimed, go to
FlashInfer unchanged. The hook is removed when the ``with`` block ends, also on error.

For each steered call the hook also records FlashInfer's own cache-file key of the chosen runner at
that call's shapes (``AutoTuner._get_cache_key(...).file_key``), which is what ``profkit repair``
writes, and what tells whether a bucket's tuned config is found at another M.
"""

from __future__ import annotations

import json
from typing import Any

from profkit.errors import ProfkitError
from profkit.sources.hooks import Hook


class SteeringError(ProfkitError):
    """The steered op has no runner of the requested class."""


def tactic_from_text(text: str) -> Any:
    """FlashInfer's tactic value from profkit's canonical tactic text (lists become tuples)."""
    from flashinfer.autotuner.autotuner import _json_to_tactic

    return _json_to_tactic(json.loads(text))


class Steering:
    """While open and aimed, ``choose_one(op, ...)`` returns ``(runner of class R, tactic)``."""

    def __init__(self) -> None:
        from flashinfer.autotuner import AutoTuner

        self._target: tuple[str, str | None, Any] | None = None
        self.calls: list[dict] = []  # one record per steered call: runner, runners, file_key
        self._hook = Hook(AutoTuner, "choose_one", self._wrap)

    def aim(self, op: str, runner: str | None, tactic: Any) -> None:
        """Steer ``op`` to the runner class named ``runner`` (None: runners[0]) with ``tactic``."""
        self._target = (op, runner, tactic)
        self.calls.clear()

    def release(self) -> None:
        """Stop steering: every call goes to FlashInfer's own choose_one again."""
        self._target = None

    def __enter__(self) -> "Steering":
        self._hook.install()
        return self

    def __exit__(self, *exc) -> None:
        self._target = None
        self._hook.uninstall()

    def _wrap(self, hook: Hook):
        steering = self

        def choose_one(tuner, custom_op, runners, tuning_config, inputs, **kwargs):
            target = steering._target
            if target is None or target[0] != custom_op:
                return hook.inner(tuner, custom_op, runners, tuning_config, inputs, **kwargs)
            _, name, tactic = target
            names = [type(r).__name__ for r in runners]
            if name is None:
                runner = runners[0]
            elif name in names:
                runner = runners[names.index(name)]
            else:
                raise SteeringError(f"op {custom_op!r} has no runner {name!r}; its runners are {', '.join(names)}")
            steering.calls.append({"runner": type(runner).__name__, "runners": names,
                                   "file_key": _file_key(tuner, custom_op, runner, tuning_config, inputs)})
            return runner, tactic

        return choose_one


def _file_key(tuner, custom_op: str, runner, tuning_config, inputs) -> str | None:
    """FlashInfer's cache-file key of ``runner`` at these inputs (None if FlashInfer cannot say)."""
    try:
        shapes = tuple(tuner._get_input_sizes(inputs))
        key = type(tuner)._get_cache_key(custom_op, runner, shapes, tuning_config, runner.get_cache_key_extras(inputs))
        return key.file_key
    except Exception:  # noqa: BLE001 - the key is a record; the op must still run
        return None
