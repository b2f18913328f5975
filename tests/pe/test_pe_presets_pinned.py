"""Every ``global_pe`` preset keeps the output (and gradients) it had before the composable
``{qk, vo}`` encodings: tests/helpers/pe_presets_before.pt was written by tests/helpers/pe_preset_fixture.py
with the code of commit b9c5e9b."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.pe_preset_fixture import CASES, CONFIGS, FIXTURE, run_case

SAVED = torch.load(FIXTURE)


@pytest.mark.parametrize("d,dtype", CONFIGS, ids=lambda x: str(x))
@pytest.mark.parametrize("name,method,options", CASES, ids=[c[0] for c in CASES])
def test_preset_output_unchanged(name, method, options, d, dtype):
    saved = SAVED[(name, d, str(dtype))]
    now = run_case(method, options, d, dtype)
    for key, ref in saved.items():
        # Bit for bit on the machine that wrote the fixture; the tolerance only absorbs a different
        # CPU's summation order (another SIMD width): 1e-12 in float64, 1e-6 in float32, relative to
        # the largest entry (an entry near 0 inherits the rounding of the large ones it was summed
        # from: 2e-6 on entries up to 9 was seen in float32 on another Xeon).
        tol = 1e-12 if dtype == torch.float64 else 1e-6
        scale = max(1.0, float(ref.abs().max()))
        torch.testing.assert_close(now[key], ref, rtol=tol, atol=tol * scale, msg=f"{name} {key} changed")
