"""Replace attributes (class methods, module functions) with wrappers, and put them back exactly.

A :class:`Hook` swaps one attribute for a wrapper that calls whatever it replaced
(``hook.inner``). :meth:`Hook.refresh` re-wraps at call time when other code replaced the
attribute after installation (tests install fake GPU timers after start-up; vLLM patches
AutoTuner properties), so profkit keeps seeing calls and still calls the newest code.
:class:`HookSet` installs a group of hooks with reference counting: nested captures share one
installation and the last one out restores what it found.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_MISSING = object()


class Hook:
    """One attribute ``owner.name`` replaced by ``make_wrapper(hook)``."""

    def __init__(self, owner: Any, name: str, make_wrapper: Callable[["Hook"], Callable]):
        self.owner = owner
        self.name = name
        self.inner: Callable | None = None
        self.wrapper = make_wrapper(self)
        self._own = _MISSING  # what owner.__dict__ held before install (_MISSING: inherited)

    def install(self) -> None:
        self._own = vars(self.owner).get(self.name, _MISSING)
        self.inner = getattr(self.owner, self.name)
        setattr(self.owner, self.name, self.wrapper)

    def refresh(self) -> None:
        """Wrap again if someone replaced the wrapper since installation."""
        current = vars(self.owner).get(self.name, _MISSING)
        if current is not self.wrapper and current is not _MISSING:
            self.inner = current
            self._own = current
            setattr(self.owner, self.name, self.wrapper)

    def uninstall(self) -> None:
        """Restore what was there; leave alone a replacement made by someone else."""
        if vars(self.owner).get(self.name, _MISSING) is not self.wrapper:
            return
        if self._own is _MISSING:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self._own)


class HookSet:
    """Hooks installed together, reference-counted across nested users."""

    def __init__(self, hooks: list[Hook]):
        self.hooks = hooks
        self._users = 0
        self._lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._users > 0

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                done = []
                try:
                    for hook in self.hooks:
                        hook.install()
                        done.append(hook)
                except BaseException:
                    for hook in reversed(done):
                        hook.uninstall()
                    raise
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for hook in reversed(self.hooks):
                    hook.uninstall()

    def refresh(self) -> None:
        for hook in self.hooks:
            hook.refresh()
