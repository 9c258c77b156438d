"""Hooks that do not keep their owner alive.

A hook registered on a parameter or module holds its callable for as long as the tensor or
module lives, and the garbage collector does not traverse a tensor's hooks: a parameter whose
hook held the optimizer (which holds the parameter) would keep both, and every bucket, forever.
These hooks reach their owner through a weak reference and are removed when it is collected::

    handles = [p.register_post_accumulate_grad_hook(weak_call(self._on_grad)) for p in params]
    remove_with(self, handles)
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

from torch.utils.hooks import RemovableHandle

__all__ = ["weak_call", "remove_with"]


def weak_call(method: Callable[..., Any], *bound: Any) -> Callable[..., None]:
    """``method(*bound, *args)`` for a bound ``method``, or nothing once its object is gone."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        live = ref()
        if live is not None:
            live(*bound, *args)

    return call


def remove_with(owner: object, handles: list[RemovableHandle]) -> None:
    """Remove ``handles`` when ``owner`` is collected."""
    weakref.finalize(owner, _remove_all, handles)


def _remove_all(handles: list[RemovableHandle]) -> None:
    for handle in handles:
        handle.remove()
