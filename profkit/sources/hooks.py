"""Replace attributes (class methods, module functions) with wrappers that compose with anyone else's.

A :class:`Hook` puts a wrapper on ``owner.name``; ``make_wrapper(layer)`` builds it and calls
``layer.inner`` for what it replaced. Other code in an engine process wraps the same methods
the ordinary way (``current = AutoTuner.choose_one; AutoTuner.choose_one = lambda ...:
current(...)``), before, during or after profkit, and removes its wrapper in any order. The
guarantee:

- **No recursion.** A wrapper's inner is fixed when the wrapper is made: it is whatever the
  attribute held then, so it can never lead back to that wrapper. When other code replaced
  profkit's wrapper after installation (a fake GPU timer, an engine's patch), :meth:`Hook.refresh`
  puts a *new* layer over the replacement instead of re-pointing the old one; the old layer keeps
  its own inner. Profkit never adopts a function into an existing wrapper.
- **Recorded once.** When foreign code sits between two of profkit's layers of one hook
  (layer -> foreign -> older layer), the older layer passes the call straight through; a layer
  entered again further down (FlashInfer's own code calling back in, e.g. ``rank_tactics`` inside
  ``get_valid_tactics``) records that nested call as its own.
- **Transparent when gone.** Uninstalling puts back what the attribute held when the top layer was
  made, if the attribute still holds profkit's layer; if other code holds a layer (it wrapped
  profkit's wrapper), that layer stays a pass-through to its inner forever, at the cost of one
  attribute check. A layer that finds itself back on its attribute while uninstalled (the other
  code restored it) puts back what it stood for, so the class ends as it would without profkit.
- **Thread-safe.** Installing, refreshing, uninstalling and that self-removal happen under one
  lock (a new one in a forked child); a refresh after the last user released does nothing.

:class:`HookSet` installs a group of hooks with reference counting: nested captures share one
installation and the last one out restores what it found. A short-lived hook (profkit verify's
steering) is a ``Hook`` used with :meth:`Hook.install` / :meth:`Hook.uninstall`, or
:func:`patched` as a ``with`` block; it composes with a capture open around it the same way.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Any, Callable, Iterator

_MISSING = object()
_LOCK = threading.RLock()  # every change profkit makes to an owner's attribute


def _new_lock_in_child() -> None:
    """A forked child has only the forking thread: a lock another thread held stays held forever."""
    global _LOCK
    _LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)


class _Local(threading.local):
    chain: tuple = ()  # this hook's layers passed on the way down since the one that records
    bypass: int = 0  # > 0: every layer of this hook passes straight through (profkit's own calls)


class Layer:
    """One wrapper profkit put on the attribute; ``inner`` is what the attribute held before it."""

    __slots__ = ("hook", "inner", "own", "function")

    def __init__(self, hook: "Hook", inner: Callable, own: Any):
        self.hook = hook
        self.inner = inner
        self.own = own  # the owner's own dict entry it replaced (_MISSING: it was inherited)
        self.function: Callable | None = None

    def restore(self) -> None:
        """Put back what this layer replaced (the caller holds the lock and checked it is on top)."""
        if self.own is _MISSING:
            delattr(self.hook.owner, self.hook.name)
        else:
            setattr(self.hook.owner, self.hook.name, self.own)


def layer_of(value: Any) -> Layer | None:
    """The profkit layer behind ``value`` (a function on an owner), None for anything else."""
    return getattr(value, "__profkit_layer__", None)


class Hook:
    """``owner.name`` wrapped by ``make_wrapper(layer)``, whose function calls ``layer.inner``."""

    def __init__(self, owner: Any, name: str, make_wrapper: Callable[[Layer], Callable]):
        self.owner = owner
        self.name = name
        self.make_wrapper = make_wrapper
        self.active = False
        self.layers: list[Layer] = []  # every layer made, oldest first; foreign code may hold any of them
        self._local = _Local()

    @property
    def inner(self) -> Callable:
        """What the newest layer wraps (for code that wants "the original" outside a call)."""
        return self.layers[-1].inner if self.layers else getattr(self.owner, self.name)

    def install(self) -> None:
        with _LOCK:
            current = vars(self.owner).get(self.name, _MISSING)
            layer = layer_of(current)
            if layer is None or layer.hook is not self:
                self._push(current)
            self.active = True

    def refresh(self) -> None:
        """While installed, put a new layer over a replacement made since (wrap at call time)."""
        with _LOCK:
            if not self.active:
                return
            current = vars(self.owner).get(self.name, _MISSING)
            if current is not _MISSING and layer_of(current) is None:
                self._push(current)

    def uninstall(self) -> None:
        """Stop recording; put back what was there if the attribute still holds this hook's layer."""
        with _LOCK:
            self.active = False
            layer = layer_of(vars(self.owner).get(self.name, _MISSING))
            if layer is not None and layer.hook is self:
                layer.restore()

    def call_through(self, *args, **kwargs):
        """Call what the attribute holds now, every layer of this hook passing straight through."""
        local = self._local
        local.bypass += 1
        try:
            return getattr(self.owner, self.name)(*args, **kwargs)
        finally:
            local.bypass -= 1

    def _push(self, own: Any) -> None:
        layer = Layer(self, getattr(self.owner, self.name), own)
        layer.function = self._layer_function(layer)
        self.layers.append(layer)
        setattr(self.owner, self.name, layer.function)

    def _heal(self, layer: Layer) -> None:
        with _LOCK:
            if not self.active and vars(self.owner).get(self.name, _MISSING) is layer.function:
                layer.restore()

    def _layer_function(self, layer: Layer) -> Callable:
        hook, inner, local = self, layer.inner, self._local
        record = self.make_wrapper(layer)
        owner_dict = vars(self.owner)

        def wrapper(*args, **kwargs):
            if not hook.active:
                if owner_dict.get(hook.name) is wrapper:  # restored by other code: stand down for good
                    hook._heal(layer)
                return inner(*args, **kwargs)
            if local.bypass:
                return inner(*args, **kwargs)
            if len(hook.layers) == 1:
                return record(*args, **kwargs)
            chain = local.chain
            if chain and wrapper not in chain:  # below a newer layer, with foreign code between
                local.chain = chain + (wrapper,)
                try:
                    return inner(*args, **kwargs)
                finally:
                    local.chain = chain
            local.chain = (wrapper,)
            try:
                return record(*args, **kwargs)
            finally:
                local.chain = chain

        functools.update_wrapper(wrapper, inner)  # name, docstring, signature (via __wrapped__)
        wrapper.__profkit_layer__ = layer
        return wrapper


class HookSet:
    """Hooks installed together, reference-counted across nested users."""

    def __init__(self, hooks: list[Hook]):
        self.hooks = hooks
        self._users = 0

    @property
    def installed(self) -> bool:
        return self._users > 0

    def hook(self, name: str) -> Hook:
        return next(h for h in self.hooks if h.name == name)

    def acquire(self) -> None:
        with _LOCK:
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
        with _LOCK:
            self._users -= 1
            if self._users == 0:
                for hook in reversed(self.hooks):
                    hook.uninstall()

    def refresh(self) -> None:
        """Re-wrap replacements made since installation; nothing once the last user released."""
        with _LOCK:
            if self._users > 0:
                for hook in self.hooks:
                    hook.refresh()


@contextlib.contextmanager
def patched(owner: Any, name: str, make_wrapper: Callable[[Layer], Callable]) -> Iterator[Hook]:
    """``owner.name`` wrapped while the block runs (a short-lived hook), removed also on error."""
    hook = Hook(owner, name, make_wrapper)
    hook.install()
    try:
        yield hook
    finally:
        hook.uninstall()
