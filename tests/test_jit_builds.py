"""profkit.sources.jit: FlashInfer's JIT builds counted while a block runs, FlashInfer's behaviour unchanged."""

from __future__ import annotations

import pytest

from profkit.sources.jit import jit_builds, jit_spec_class


def _spec():
    """A real FlashInfer JIT spec whose library is not on disk (building it would compile)."""
    from flashinfer.jit import core

    return core.JitSpecNvcc(name="profkit_test_never_built", sources=[], extra_cflags=None, extra_cuda_cflags=None,
                            extra_ldflags=None, extra_include_dirs=None)


def test_a_failed_build_raises_as_without_the_hook_is_not_counted_and_the_hook_goes(monkeypatch):
    monkeypatch.setenv("FLASHINFER_DISABLE_JIT", "1")  # FlashInfer refuses to compile: its own error, at once
    cls = jit_spec_class()
    original = vars(cls)["build"]
    spec = _spec()
    assert not spec.jit_library_path.exists()
    with pytest.raises(Exception) as bare:
        spec.build()
    with jit_builds() as built:
        assert vars(cls)["build"] is not original
        with pytest.raises(type(bare.value), match="FLASHINFER_DISABLE_JIT"):
            spec.build()
    assert (built.modules, built.seconds) == ([], 0.0)
    assert vars(cls)["build"] is original


def test_the_hook_goes_when_the_block_raises():
    cls = jit_spec_class()
    original = vars(cls)["build"]
    with pytest.raises(KeyError), jit_builds():
        raise KeyError("the port failed")
    assert vars(cls)["build"] is original
