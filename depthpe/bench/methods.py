"""The text form of an encoding with options, as the benchmarks take it on the command line:
``PRESET[,option=value...]`` or ``qk=A,vo=B[,option=value...]`` (``parse_method``), and the run-config
overrides that select it (``method_overrides``)."""

from __future__ import annotations

import json

import yaml

from ..pe.spec import encoding_pair


def parse_method(text: str) -> tuple[str | dict, dict]:
    """``"prope"`` -> ("prope", {}); ``"qk=p2d,vo=KRtAdd2d,softmax=blockwise"`` ->
    ({"qk": "p2d", "vo": "KRtAdd2d"}, {"softmax": "blockwise"}). Values are read as YAML scalars.
    Raises ``ValueError`` naming the valid presets and pairs."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    method: str | dict = {}
    options = {}
    for n, item in enumerate(items):
        key, sep, value = item.partition("=")
        if not sep and n == 0:
            method = key
        elif key in ("qk", "vo") and isinstance(method, dict):
            method[key] = value
        elif sep:
            options[key] = yaml.safe_load(value)
        else:
            raise ValueError(f"method {text!r}: {item!r} is not key=value")
    encoding_pair(method)
    return method, options


def method_overrides(text: str) -> list[str]:
    """Run-config overrides selecting the encoding ``text`` (``parse_method``'s form):
    ``"urope,num_anchors=2"`` -> ["model.global_pe=urope", "model.pe_options.num_anchors=2"]; a pair
    gives ``model.global_pe={qk: A, vo: B}``. Raises ``ValueError`` as ``parse_method``."""
    method, options = parse_method(text)
    pe = method if isinstance(method, str) else "{qk: %s, vo: %s}" % (method["qk"], method["vo"])
    return [f"model.global_pe={pe}", *(f"model.pe_options.{k}={json.dumps(v)}" for k, v in options.items())]


def is_method_text(word: str) -> bool:
    """Whether a command-line word is an encoding in ``parse_method``'s form rather than a run-config
    override ``KEY=VALUE``: no ``=``, a comma before the first ``=`` (``urope,num_anchors=2``), or a
    pair (``qk=...``)."""
    key, sep, _ = word.partition("=")
    return not sep or "," in key or key.strip() in ("qk", "vo")
