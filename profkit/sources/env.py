"""Provenance of a run: GPU, driver, CUDA, torch, flashinfer, cuDNN, cuBLAS, host, time, command."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import socket
import sys
import uuid

from profkit._versions import PROFKIT_VERSION


def new_run_id() -> str:
    """A short unique id: UTC time plus random suffix, sortable by start time."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{uuid.uuid4().hex[:6]}"


def current_rank() -> int | None:
    """The process's rank: torch.distributed's once initialised, else RANK / LOCAL_RANK; None if unknown.

    Engines that spawn their own workers (SGLang's TP ranks) set no RANK variable but initialise
    torch.distributed before tuning; torchrun sets RANK before anything starts. torch is only
    looked up, never imported, so this is cheap in processes that do not use it.
    """
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
    except Exception:  # noqa: BLE001 - a half-initialised process group: fall back to the launcher's variables
        pass
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def utc_now() -> str:
    """The current UTC time as ISO-8601 text, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def collect_env(run_id: str, *, source_kind: str = "capture", started_at: str | None = None) -> dict:
    """Everything known about this process's software and hardware, as strings (missing = None)."""
    env = {
        "run_id": run_id,
        "source_kind": source_kind,
        "host": socket.gethostname(),
        "pid": str(os.getpid()),
        "rank": _str(current_rank()),
        "started_at": started_at or utc_now(),
        "command": mask_secrets(" ".join([os.path.basename(sys.executable)] + sys.argv)),
        "python": platform.python_version(),
        "profkit": PROFKIT_VERSION,  # the profkit that runs, also a checkout on PYTHONPATH (no distribution)
        "flashinfer": _flashinfer_version(),
        "cudnn_frontend": _dist_version("nvidia-cudnn-frontend"),
    }
    env["flags"] = _flashinfer_flags()
    env.update(_torch_facts())
    env.update(_flashinfer_metadata())
    env["driver"] = _driver_version()
    return env


MASK = "***"
# A flag whose last word names a secret: --api-key, --hf-token, --password (not --max-tokens, --keyfile).
_SECRET_FLAG = re.compile(r"--?(?:[\w.-]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd|credentials?)",
                          re.IGNORECASE)
# An environment assignment of a secret: OPENAI_API_KEY=..., HF_TOKEN=..., DB_PASSWORD=...
_SECRET_ASSIGNMENT = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*_)?(?:KEY|TOKEN|SECRET|PASSWORD)=", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")


def mask_secrets(command: str | None) -> str | None:
    """``command`` with the values of arguments that look like secrets replaced by ``***``.

    Masked: the value after (or ``=`` in) a flag whose last word is a secret's (``--api-key``,
    ``--token``, ``--hf-token``, ``--password``, ``--secret``, ``--key``), an assignment
    ``NAME_KEY=`` / ``NAME_TOKEN=`` / ``NAME_SECRET=`` / ``NAME_PASSWORD=``, and ``user:pass@`` in a
    URL. Everything else is kept as written. None stays None.
    """
    if command is None:
        return None
    parts = re.split(r"(\s+)", str(command))
    hide_next = False
    for i, part in enumerate(parts):
        if not part or part.isspace():
            continue
        if hide_next:
            parts[i], hide_next = MASK, False
            continue
        flag = _SECRET_FLAG.fullmatch(part.split("=", 1)[0])
        if flag and "=" in part:
            parts[i] = part.split("=", 1)[0] + "=" + MASK
        elif flag:
            hide_next = True
        elif (assignment := _SECRET_ASSIGNMENT.match(part)) is not None:
            parts[i] = assignment.group(0) + MASK
        else:
            parts[i] = _URL_CREDENTIALS.sub(MASK + "@", part)
    return "".join(parts)


def _torch_facts() -> dict:
    try:
        import torch
    except ImportError:
        return {}
    facts = {"torch": torch.__version__, "cuda": _str(torch.version.cuda)}
    try:
        facts["cudnn"] = _str(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001 - a CPU torch may lack the cuDNN probe
        facts["cudnn"] = None
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        facts.update(gpu=props.name, gpu_count=str(torch.cuda.device_count()),
                     sm=f"{props.major}{props.minor}", gpu_memory_mib=str(props.total_memory // 2**20))
    else:
        facts.update(gpu=None, gpu_count="0")
    return facts


def _flashinfer_metadata() -> dict:
    """FlashInfer's own cache metadata (cuBLAS / cuDNN backend versions as its cache records them)."""
    try:
        from flashinfer.autotuner import autotuner as at

        meta = at._collect_metadata()
    except Exception:  # noqa: BLE001 - older versions or no GPU: keep the other facts
        return {}
    facts = {"cublas": _known(meta.get("cublas_version")), "flashinfer_metadata_gpu": _known(meta.get("gpu"))}
    if meta.get("cudnn_version") not in (None, "unknown"):
        facts["cudnn"] = str(meta["cudnn_version"])
    return facts


def _flashinfer_flags() -> str:
    """Private FlashInfer switches that change what tunes (e.g. the SM90 mm_bf16(auto) workaround)."""
    gemm_base = sys.modules.get("flashinfer.gemm.gemm_base")
    if gemm_base is not None and getattr(gemm_base, "_TGV_DEBUG_USE_CPP", False):
        return "flashinfer.gemm.gemm_base._TGV_DEBUG_USE_CPP=True"
    return ""


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - no NVIDIA driver on this machine
        return None


def _flashinfer_version() -> str | None:
    """The imported flashinfer's own version (the one that ran), else the installed one."""
    module = sys.modules.get("flashinfer")
    return getattr(module, "__version__", None) or _dist_version("flashinfer-python")


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _known(value) -> str | None:
    return None if value in (None, "", "unknown") else str(value)


def _str(value) -> str | None:
    return None if value is None else str(value)
