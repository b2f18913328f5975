"""Tests of depthpe.model: config, frozen backbone, aggregator, DPT head, DepthModel I/O."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import warnings

import pytest
import torch

from depthpe import DepthModel, DepthModelConfig
from depthpe.geometry import DegenerateSceneError
from depthpe.model import PRESETS, CheckpointMismatchError, ConfigError
from depthpe.model import aggregator as aggregator_module
from depthpe.model.backbone import BackboneWeightsError, build_backbone
from depthpe.model.blocks import AggregatorBlock
from depthpe.model.depth_model import check_inputs
from depthpe.pe import available_encodings
from depthpe.model.dpt import DPTHead, FeatureFusionBlock, ResidualConvUnit, conv1x1, sincos_embed_2d, uv_grid

H, W = 56, 70  # 4 x 5 patches: small and non-square


def tiny_config(**overrides) -> DepthModelConfig:
    return DepthModelConfig.from_preset("tiny", **overrides)


@pytest.fixture(scope="module")
def model() -> DepthModel:
    torch.manual_seed(0)
    return DepthModel(tiny_config()).eval()


def strong_attention(m: DepthModel) -> DepthModel:
    """Set every LayerScale gamma to 1 so that attention effects are large (init is 0.01)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("gamma") and name.startswith("aggregator.") and "patch_embed" not in name:
                p.fill_(1.0)
    return m


def random_rotation(gen: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def make_inputs(B=1, S=3, seed=0, normalized=True):
    """Images in [0,1], pixel K, w2c (B, S, 3, 4). normalized: view 0 identity, unit scale."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand(B, S, 3, H, W, generator=gen)
    K = torch.tensor([[50.0, 0, W / 2 - 0.5], [0, 50.0, H / 2 - 0.5], [0, 0, 1]]).expand(B, S, 3, 3)
    w2c = torch.zeros(B, S, 3, 4, dtype=torch.float64)
    for b in range(B):
        for s in range(S):
            w2c[b, s, :, :3] = random_rotation(gen)
            w2c[b, s, :, 3] = torch.randn(3, generator=gen, dtype=torch.float64)
    if normalized:
        from depthpe.geometry import normalize_scene

        w2c = normalize_scene(w2c)[0][..., :3, :]
    return images, K.clone(), w2c.float() if normalized else w2c


# --------------------------------------------------------------------------- config


def test_import_depthpe_stays_light():
    code = (
        "import sys, depthpe; from depthpe import DepthModelConfig; "
        "c = DepthModelConfig.from_preset('tiny'); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_config_presets_overrides_and_json_roundtrip(tmp_path):
    assert set(PRESETS) >= {"tiny", "vggt-1b"}
    big = DepthModelConfig.from_preset("vggt-1b")
    assert (big.embed_dim, big.num_blocks, big.num_heads, big.head_layers) == (1024, 24, 16, [4, 11, 17, 23])
    assert big.backbone == "vit_large_patch14_reg4_dinov2" and big.head_out_channels == [256, 512, 1024, 1024]
    cfg = tiny_config(global_pe="none", pe_options={"base": 50.0})
    assert cfg.global_pe == "none" and cfg.head_dim % 8 == 0
    cfg.to_json(tmp_path / "config.json")
    data = json.loads((tmp_path / "config.json").read_text())
    assert all(not isinstance(v, dict) or k == "pe_options" for k, v in data.items())  # flat
    assert DepthModelConfig.from_json(tmp_path / "config.json") == cfg


@pytest.mark.parametrize(
    "bad, says",
    [
        (dict(head_layers=[0, 1, 2]), "head_layers must be 4 non-decreasing block indices"),  # not 4
        (dict(head_layers=[0, 2, 1, 3]), "got [0, 2, 1, 3]"),  # not increasing
        (dict(head_layers=[0, 1, 2, 2]), "head_layers"),
        (dict(num_blocks=6), "num_blocks"),  # blocks after the last head layer would be unused
        (dict(embed_dim=100, num_heads=8), "embed_dim=100 is not divisible by num_heads=8"),
        (dict(embed_dim=24, num_heads=4), "head_dim = embed_dim / num_heads = 6 must be divisible by 4"),
        (dict(backbone="resnet50"), "backbone='resnet50' is not a timm DINOv2 model name"),
        (dict(head_out_channels=[32, 64, 128]), "head_out_channels must be 4 positive multiples of 4"),
        (dict(head_out_channels=[32, 64, 128, 130]), "got [32, 64, 128, 130]"),
        (dict(layerscale_init=0.0), "layerscale_init must be positive, got 0.0"),
        (dict(backbone_blocks=0), "backbone_blocks must be >= 1 or null, got 0"),
        (dict(num_heads=0), "num_heads must be a positive integer, got 0"),
        (dict(patch_size=0), "patch_size must be a positive integer, got 0"),
        (dict(num_register_tokens=-1), "num_register_tokens must be >= 0, got -1"),
        (dict(mlp_ratio=0.0), "mlp_ratio must be positive, got 0.0"),
        (dict(head_features=36), "head_features must be a multiple of 8"),
    ],
)
def test_config_rejects_invalid(bad, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        tiny_config(**bad)


@pytest.mark.parametrize(
    "pe, options, says",
    [
        ("prope", {"num_anchors": 2}, r"unknown option\(s\) \['num_anchors'\]"),
        ("urope", {"num_anchors": 3}, "cannot be split into 3 anchor groups"),
        ("prope", {"softmax": "sometimes"}, "softmax"),
        ("gta", {"fused_attention": "maybe"}, "fused_attention must be auto, on or off"),
    ],
)
def test_options_the_encoding_does_not_take_are_refused_with_the_config(pe, options, says):
    with pytest.raises(ConfigError, match=f"invalid DepthModelConfig: pe_options .*{says}"):
        tiny_config(global_pe=pe, pe_options=options)
    with pytest.raises(ConfigError, match=says):  # a whole training step would not find it sooner
        tiny_config(global_pe="urope" if pe == "prope" else "prope").replace(global_pe=pe, pe_options=options)


def test_options_the_encoding_takes_are_kept_and_build_a_model():
    cfg = tiny_config(global_pe="urope", pe_options={"num_anchors": 2, "fused_attention": "off"})
    assert cfg.pe_options == {"num_anchors": 2, "fused_attention": "off"}
    assert DepthModel(cfg).config.pe_options["num_anchors"] == 2


def test_layerscale_init_sets_every_aggregator_block():
    model = DepthModel(tiny_config(layerscale_init=0.5))
    blocks = [*model.aggregator.frame_blocks, *model.aggregator.global_blocks]
    gammas = torch.cat([torch.cat([b.ls1.gamma, b.ls2.gamma]) for b in blocks])
    assert torch.equal(gammas, torch.full_like(gammas, 0.5))
    assert DepthModelConfig().layerscale_init == 0.01  # VGGT's value for the vggt-1b preset


def test_config_unknown_field_and_preset():
    with pytest.raises(ConfigError, match="unknown DepthModelConfig field"):
        DepthModelConfig.from_dict({"embed_dimm": 3})
    with pytest.raises(ConfigError, match="unknown model preset"):
        DepthModelConfig.from_preset("huge")
    with pytest.raises(ValueError, match="unknown encoding 'nope'.*valid pairs"):
        DepthModel(tiny_config(global_pe="nope"))
    with pytest.raises(ConfigError, match="pair .qk: KRt, vo: p2d. is not accepted.*valid pairs"):
        tiny_config(global_pe={"qk": "KRt", "vo": "p2d"})
    with pytest.raises(ConfigError, match="needs a head dim divisible by 8"):
        tiny_config(global_pe={"qk": "p2d", "vo": "none"}, embed_dim=48, num_heads=4)  # head dim 12


# --------------------------------------------------------------------------- forward


def test_forward_shapes_dtypes_and_ranges(model):
    images, K, w2c = make_inputs(B=2, S=3)
    with torch.no_grad():
        out = model(images, K, w2c)
    for key in ("depth", "conf"):
        assert out[key].shape == (2, 3, H, W) and out[key].dtype == torch.float32
        assert torch.isfinite(out[key]).all()
    assert (out["depth"] > 0).all() and (out["conf"] > 1).all()
    # 4x4 extrinsics give the same result as 3x4
    w2c4 = torch.cat([w2c, torch.tensor([0, 0, 0, 1.0]).expand(2, 3, 1, 4)], dim=-2)
    with torch.no_grad():
        out4 = model(images, K, w2c4)
    torch.testing.assert_close(out4["depth"], out["depth"])


def test_bf16_autocast_keeps_head_in_fp32(model):
    images, K, w2c = make_inputs(B=1, S=2)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(images, K, w2c)
    with torch.no_grad():
        ref = model(images, K, w2c)
    assert out["depth"].dtype == torch.float32 and torch.isfinite(out["depth"]).all()
    torch.testing.assert_close(out["depth"], ref["depth"], rtol=0.05, atol=0.0)


def test_views_are_not_independent_and_first_view_is_special(model):
    images, K, w2c = make_inputs(B=1, S=3)
    model = strong_attention(copy.deepcopy(model))
    other = images.clone()
    other[:, 2] = torch.rand_like(other[:, 2])
    with torch.no_grad():
        base, changed = model(images, K, w2c)["depth"], model(other, K, w2c)["depth"]
        tok, tok_changed = model.aggregator(images, K, w2c)[-1], model.aggregator(other, K, w2c)[-1]
    # global attention: changing view 2 changes the features and prediction of view 0 ...
    assert (base[:, 0] - changed[:, 0]).abs().max() > 0
    assert (tok[:, 0] - tok_changed[:, 0]).norm() > 1e-2 * tok[:, 0].norm()
    # ... but not the frame-attention half of the first layer (frame attention stays within a view)
    first, first_changed = (model.aggregator(x, K, w2c)[0] for x in (images, other))
    C = first.shape[-1] // 2
    torch.testing.assert_close(first[:, 0, :, :C], first_changed[:, 0, :, :C])
    tok = model.aggregator.special_tokens(2, 3)
    assert torch.equal(tok[:, 0, :1], model.aggregator.camera_token[:, 0].expand(2, 1, -1))
    assert torch.equal(tok[:, 1:, 1:], model.aggregator.register_token[:, 1:].expand(2, 2, -1, -1))


@pytest.mark.parametrize("pe", sorted({"none", "rope", *available_encodings()}))
def test_every_registered_global_pe_runs_and_trains(pe):
    """Every encoding in the registry plugs into the aggregator ("none" and "rope" at least)."""
    torch.manual_seed(0)
    m = DepthModel(tiny_config(global_pe=pe)).train()
    images, K, w2c = make_inputs(B=1, S=2)
    out = m(images, K, w2c)
    assert out["depth"].shape == (1, 2, H, W) and torch.isfinite(out["depth"]).all()
    out["depth"].mean().backward()
    assert all(p.grad is not None for p in m.trainable_parameters())


def test_global_rope_changes_the_output():
    torch.manual_seed(0)
    m_rope = DepthModel(tiny_config(global_pe="rope")).eval()
    m_none = DepthModel(tiny_config(global_pe="none")).eval()
    strong_attention(m_rope)
    m_none.load_state_dict(m_rope.state_dict())
    images, K, w2c = make_inputs(B=1, S=2)
    with torch.no_grad():
        a, b = m_rope.aggregator(images, K, w2c)[-1], m_none.aggregator(images, K, w2c)[-1]
    assert (a - b).norm() > 1e-2 * a.norm()


def test_global_encoding_prepared_once_per_forward(model, monkeypatch):
    calls = []
    real = aggregator_module.prepare_encoding

    def counting(method, **kwargs):
        calls.append((method, kwargs))
        return real(method, **kwargs)

    monkeypatch.setattr(aggregator_module, "prepare_encoding", counting)
    cfg = tiny_config(global_pe="none")
    m = DepthModel(cfg).eval()
    images, K, w2c = make_inputs(B=1, S=2)
    with torch.no_grad():
        m(images, K, w2c)
    global_calls = [c for c in calls if c[0] == "none"]
    assert len(global_calls) == 1 and cfg.num_blocks > 1
    kw = global_calls[0][1]
    assert kw["K"] is K and kw["w2c"] is w2c
    assert kw["image_size"] == (H, W) and kw["grid"] == (H // 14, W // 14)
    assert kw["num_special"] == 1 + cfg.num_register_tokens and kw["patch_offset"] == 1
    assert len([c for c in calls if c[0] == "rope"]) == 1  # frame RoPE, also once


def test_pe_options_reach_the_global_encoding(monkeypatch):
    seen = {}
    real = aggregator_module.prepare_encoding

    def spy(method, **kwargs):
        if method == "rope" and kwargs.get("K") is not None:
            seen.update(kwargs)
        return real(method, **kwargs)

    monkeypatch.setattr(aggregator_module, "prepare_encoding", spy)
    m = DepthModel(tiny_config(pe_options={"base": 30.0})).eval()
    with torch.no_grad():
        m(*make_inputs(B=1, S=2))
    assert seen["base"] == 30.0


# --------------------------------------------------------------------------- training


def test_backbone_frozen_eval_and_every_trainable_param_gets_grad():
    torch.manual_seed(0)
    m = DepthModel(tiny_config())
    m.train()
    assert m.training and m.aggregator.training and m.depth_head.training
    assert not m.aggregator.patch_embed.training
    assert not any(mod.training for mod in m.aggregator.patch_embed.modules())
    images, K, w2c = make_inputs(B=1, S=2)
    out = m(images, K, w2c)
    (out["depth"].log().mean() + out["conf"].mean()).backward()
    backbone = dict(m.aggregator.patch_embed.named_parameters())
    assert backbone and all(not p.requires_grad and p.grad is None for p in backbone.values())
    trainable = dict((n, p) for n, p in m.named_parameters() if p.requires_grad)
    assert len(trainable) + len(backbone) == len(list(m.parameters()))
    assert [p for p in m.trainable_parameters()] == list(trainable.values())
    for name, p in trainable.items():
        assert p.grad is not None, f"{name} got no gradient (would break DDP)"
        assert torch.isfinite(p.grad).all(), name
        if not name.endswith("k_norm.bias"):  # softmax is nearly shift invariant in k's bias
            assert p.grad.abs().max() > 0, f"{name} has an all-zero gradient"
    m.eval()
    assert not m.training and not m.aggregator.patch_embed.training


def test_train_backbone_gives_the_backbone_gradients_and_the_same_forward():
    torch.manual_seed(0)
    frozen = DepthModel(tiny_config())
    torch.manual_seed(0)
    trained = DepthModel(tiny_config(train_backbone=True))
    assert not DepthModelConfig.from_preset("tiny").train_backbone  # frozen by default
    images, K, w2c = make_inputs(B=1, S=2)
    with torch.no_grad():
        assert torch.equal(frozen(images, K, w2c)["depth"], trained(images, K, w2c)["depth"])
    trained.train()
    assert not trained.aggregator.patch_embed.training  # still eval mode
    trained(images, K, w2c)["depth"].log().mean().backward()
    backbone = dict(trained.aggregator.patch_embed.named_parameters())
    assert all(p.requires_grad for p in backbone.values())
    assert trained.trainable_parameters() == list(trained.parameters())
    grads = [p.grad for n, p in backbone.items() if n.startswith(("patch_embed.", "blocks.0.attn"))]
    assert grads and all(g is not None and g.abs().max() > 0 for g in grads)
    in_groups = {id(p) for g in trained.param_groups(0.05) for p in g["params"]}
    assert {id(p) for p in backbone.values()} <= in_groups


def test_param_groups_split_decay_and_no_decay(model):
    groups = model.param_groups(0.05)
    assert [g["weight_decay"] for g in groups] == [0.05, 0.0]
    decay, no_decay = ({id(p) for p in g["params"]} for g in groups)
    assert not decay & no_decay
    assert decay | no_decay == {id(p) for p in model.trainable_parameters()}
    named = dict(model.named_parameters())
    no_decay_names = set(model.no_weight_decay_names())
    for name in (
        "aggregator.camera_token",
        "aggregator.register_token",
        "aggregator.frame_blocks.0.ls1.gamma",
        "aggregator.global_blocks.0.norm1.weight",
        "aggregator.global_blocks.0.attn.qkv.bias",
        "depth_head.norm.weight",
    ):
        assert name in no_decay_names and id(named[name]) in no_decay
    for name in ("aggregator.frame_blocks.0.attn.qkv.weight", "depth_head.projects.0.weight"):
        assert id(named[name]) in decay
    torch.optim.AdamW(groups, lr=1e-4)  # accepted by the optimizer


def test_gradient_checkpointing_matches_plain():
    torch.manual_seed(0)
    plain = DepthModel(tiny_config()).train()
    ckpt = DepthModel(tiny_config(gradient_checkpointing=True)).train()
    ckpt.load_state_dict(plain.state_dict())
    images, K, w2c = make_inputs(B=1, S=2)
    grads, calls = [], []
    for m in (plain, ckpt):
        count, block = [], m.aggregator.global_blocks[0]
        block.forward = lambda *a, _f=block.forward, **k: count.append(1) or _f(*a, **k)
        out = m(images, K, w2c)
        out["depth"].mean().backward()
        grads.append(m.aggregator.frame_blocks[0].attn.qkv.weight.grad.clone())
        calls.append(len(count))
    torch.testing.assert_close(grads[0], grads[1])
    assert calls == [1, 2]  # checkpointed blocks run again in the backward pass
    ckpt.eval()
    with torch.no_grad():
        ckpt(images, K, w2c)  # no checkpointing outside training


def _count_block_calls(m: DepthModel) -> dict[str, int]:
    """Forward calls of every AggregatorBlock of ``m`` by name (forward hooks, also on recompute)."""
    calls: dict[str, int] = {}
    for name, mod in m.named_modules():
        if isinstance(mod, AggregatorBlock):
            calls[name] = 0
            mod.register_forward_pre_hook(lambda *_, _n=name: calls.__setitem__(_n, calls[_n] + 1))
    return calls


def test_gradient_checkpointing_covers_every_aggregator_block():
    """Every frame and global block is recomputed in the backward pass (checkpointed) when
    gradient_checkpointing is on, and only then; there are no other aggregator blocks."""
    images, K, w2c = make_inputs(B=1, S=2)
    for checkpointing, expected in ((True, 2), (False, 1)):
        torch.manual_seed(0)
        m = DepthModel(tiny_config(gradient_checkpointing=checkpointing, global_pe="prope")).train()
        calls = _count_block_calls(m)
        assert len(calls) == 2 * m.config.num_blocks
        m(images, K, w2c)["depth"].mean().backward()
        assert calls == {name: expected for name in calls}, calls
        m.eval()
        with torch.no_grad():
            m(images, K, w2c)
        assert calls == {name: expected + 1 for name in calls}  # no recompute outside training


def test_aggregator_keeps_only_the_head_layers_patch_tokens():
    """The aggregator returns one (B, S, h*w, 2C) tensor per head layer (cat of the frame and global
    block outputs, patch tokens only) and keeps no other block's output: a layer the head reads
    twice is one tensor, and each kept tensor owns exactly its own storage."""
    torch.manual_seed(0)
    m = DepthModel(tiny_config(head_layers=[1, 1, 2, 3])).eval()
    images, K, w2c = make_inputs(B=1, S=2)
    seen = {}
    for kind in ("frame", "global"):
        for i, block in enumerate(getattr(m.aggregator, f"{kind}_blocks")):
            block.register_forward_hook(lambda _m, _a, out, _k=(kind, i): seen.__setitem__(_k, out))
    with torch.no_grad():
        outs = m.aggregator(images, K, w2c)
    B, S, h, w, C, ns = 1, 2, H // 14, W // 14, m.config.embed_dim, m.config.num_special_tokens
    assert len(outs) == 4 and outs[0] is outs[1] and len({id(o) for o in outs}) == 3
    for layer, out in zip(m.config.head_layers, outs):
        frame = seen[("frame", layer)].reshape(B * S, -1, C)[:, ns:]
        glob = seen[("global", layer)].reshape(B * S, -1, C)[:, ns:]
        torch.testing.assert_close(out, torch.cat([frame, glob], -1).reshape(B, S, h * w, 2 * C), rtol=0, atol=0)
        assert out.untyped_storage().nbytes() == out.numel() * out.element_size()


# --------------------------------------------------------------------------- save / load


def test_save_and_from_pretrained_roundtrip(model, tmp_path, monkeypatch):
    model.save_pretrained(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    cfg = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert cfg == model.config.to_dict()

    # A checkpoint whose config says pretrained=True must not try to download the backbone.
    cfg["pretrained"] = True
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    import timm

    real_create = timm.create_model

    def no_download(*args, **kwargs):
        assert not kwargs.get("pretrained"), "from_pretrained tried to download backbone weights"
        return real_create(*args, **kwargs)

    monkeypatch.setattr(timm, "create_model", no_download)
    loaded = DepthModel.from_pretrained(tmp_path / "ckpt")
    assert loaded.config.pretrained is True and not loaded.training
    images, K, w2c = make_inputs(B=1, S=3)
    with torch.no_grad():
        a, b = model(images, K, w2c), loaded(images, K, w2c)
    assert torch.equal(a["depth"], b["depth"]) and torch.equal(a["conf"], b["conf"])
    again = DepthModel.from_pretrained(str(tmp_path / "ckpt"), gradient_checkpointing=True)
    assert again.config.gradient_checkpointing and again.aggregator.gradient_checkpointing


def test_from_pretrained_is_strict(model, tmp_path):
    from safetensors.torch import load_file, save_file

    model.save_pretrained(tmp_path / "ok")
    sd = load_file(str(tmp_path / "ok" / "model.safetensors"))
    for name, change in (
        ("missing", lambda d: d.pop("depth_head.norm.weight")),
        ("extra", lambda d: d.__setitem__("depth_head.bogus", torch.zeros(1))),
    ):
        d = {k: v.clone() for k, v in sd.items()}
        change(d)
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text((tmp_path / "ok" / "config.json").read_text())
        save_file(d, str(tmp_path / name / "model.safetensors"))
        key = "depth_head.norm.weight" if name == "missing" else "depth_head.bogus"
        with pytest.raises(CheckpointMismatchError, match=key):
            DepthModel.from_pretrained(tmp_path / name)
    with pytest.raises(FileNotFoundError, match="missing"):
        DepthModel.from_pretrained(tmp_path)  # a directory without a checkpoint


def test_from_pretrained_refuses_a_config_that_does_not_match_the_weights_before_building(model, tmp_path,
                                                                                         monkeypatch):
    """A config.json claiming embed_dim 16384 next to small weights: refused from the file's header and a
    model built on the meta device, before any real model (about 100 GB here) is allocated."""
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "embed_dim": 16384}))
    real_init = DepthModel.__init__

    def init_only_on_meta(self, config, **kwargs):
        assert torch.get_default_device().type == "meta", "a real model was built before the weights were checked"
        real_init(self, config, **kwargs)

    monkeypatch.setattr(DepthModel, "__init__", init_only_on_meta)
    with pytest.raises(CheckpointMismatchError) as err:
        DepthModel.from_pretrained(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'config.json'} does not describe the weights in "
                              f"{tmp_path / 'model.safetensors'} (checked before building the model): ")
    assert "aggregator.camera_token: checkpoint (1, 2, 1, 128) vs model (1, 2, 1, 16384)" in message
    assert message.endswith("Was config.json edited, or the checkpoint saved by a different depthpe version?")
    (tmp_path / "model.safetensors").write_bytes(b"\x10" * 64)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointMismatchError, match="model.safetensors: not a readable safetensors file"):
        DepthModel.from_pretrained(tmp_path)


# --------------------------------------------------------------------------- predict


def test_predict_returns_depth_in_caller_units(model):
    images, K, w2c = make_inputs(B=2, S=3, normalized=False)  # float64 cameras, arbitrary world
    out1 = model.predict(images, K, w2c)
    w2c3 = w2c.clone()
    w2c3[..., 3] *= 3.0  # the same scene with the world scaled by 3
    out3 = model.predict(images, K, w2c3)
    torch.testing.assert_close(out3["depth"], 3.0 * out1["depth"], rtol=1e-4, atol=0)
    torch.testing.assert_close(out3["scale"], 3.0 * out1["scale"], rtol=1e-6, atol=0)
    torch.testing.assert_close(out3["conf"], out1["conf"], rtol=1e-4, atol=1e-4)
    # predict == forward on the normalized scene times the scale
    from depthpe.geometry import normalize_scene

    w2c_n, _, s = normalize_scene(w2c)
    with torch.no_grad():
        ref = model(images, K, w2c_n.float())["depth"] * s.float().view(-1, 1, 1, 1)
    torch.testing.assert_close(out1["depth"], ref, rtol=1e-5, atol=0)
    # unbatched input
    single = model.predict(images[0], K[0], w2c[0])
    assert single["depth"].shape == (3, H, W)
    torch.testing.assert_close(single["depth"], out1["depth"][0], rtol=1e-5, atol=1e-6)


def test_predict_degenerate_scene_needs_scale(model):
    images, K, _ = make_inputs(B=1, S=2)
    w2c = torch.eye(4)[:3].expand(1, 2, 3, 4).clone()  # both cameras at the same place
    with pytest.raises(DegenerateSceneError, match="scale="):
        model.predict(images, K, w2c)
    out = model.predict(images, K, w2c, scale=2.0)
    with torch.no_grad():
        ref = model(images, K, w2c)["depth"]
    torch.testing.assert_close(out["depth"], 2.0 * ref)


def test_predict_restores_training_mode():
    m = DepthModel(tiny_config()).train()
    m.predict(*make_inputs(B=1, S=2, normalized=False))
    assert m.training and not m.aggregator.patch_embed.training
    m.eval().predict(*make_inputs(B=1, S=2, normalized=False))
    assert not m.training and not m.depth_head.training  # a model in eval mode stays in it


def test_images_exactly_in_range_are_accepted(model):
    """[0, 1] with a little slack for rounding (1e-3): exact black and white images are fine."""
    images, K, w2c = make_inputs(B=1, S=3)
    for value in (0.0, 1.0, 1.0005, -0.0005):
        model.check_inputs(torch.full_like(images, value), K, w2c)


# --------------------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    "mutate, message, static",
    [
        (lambda i, k, w: (i[..., :50, :], k, w), "multiple of the patch size", True),
        (lambda i, k, w: (i[0], k, w), r"\(B, S, 3, H, W\)", True),
        (lambda i, k, w: (i, k[:, :2], w), "K must have shape", True),
        (lambda i, k, w: (i, k, w[:, :2]), "w2c must have shape", True),
        (lambda i, k, w: (i, k, w[..., :3]), "w2c must have shape", True),
        (lambda i, k, w: ((i * 255).to(torch.uint8), k, w), "float", True),
        (lambda i, k, w: (i, k, w.clone().index_fill_(1, torch.tensor([1]), float("nan"))), "w2c contains NaN", False),
        (lambda i, k, w: (i, k.clone().index_fill_(1, torch.tensor([0]), float("inf")), w), "K contains NaN", False),
        (lambda i, k, w: (i, -k, w), "non-positive focal", False),
        (lambda i, k, w: (i * float("nan"), k, w), "images contain NaN", False),
        (lambda i, k, w: (i * 255, k, w), r"\[0, 1\]", False),
        # one bad part is enough: a width, fy, a translation, a row too many, an image just out of range
        (lambda i, k, w: (i[..., :50], k, w), "multiple of the patch size", True),
        (lambda i, k, w: (i, k * torch.tensor([1.0, -1.0, 1.0]).view(3, 1), w), "non-positive focal", False),
        (lambda i, k, w: (i, k, w.clone().index_fill_(3, torch.tensor([3]), float("nan"))), "w2c contains NaN", False),
        (lambda i, k, w: (i, k, torch.cat([w, w[..., :2, :]], dim=2)), "w2c must have shape", True),  # 5 x 4
        (lambda i, k, w: (i.clamp(0, 1).index_fill(4, torch.tensor([0]), 1.01), k, w), r"\[0, 1\]", False),
        (lambda i, k, w: (i.clamp(0, 1).index_fill(4, torch.tensor([0]), -0.01), k, w), r"\[0, 1\]", False),
    ],
)
def test_forward_rejects_bad_inputs(model, mutate, message, static):
    """Every bad input is refused by ``DepthModel.check_inputs`` (the boundary: predict, evaluation);
    shape errors also by ``forward``, which reads no values (no host sync, compiles to one graph)."""
    images, K, w2c = mutate(*make_inputs(B=1, S=3))
    with pytest.raises(ValueError, match=message):
        model.check_inputs(images, K, w2c)
    with pytest.raises(ValueError, match=message):
        check_inputs(images, K, w2c, model.config.patch_size)
    if static:
        with pytest.raises(ValueError, match=message):
            model(images, K, w2c)
    else:
        with pytest.raises(ValueError, match=message):
            model.predict(images, K, w2c)


def test_check_inputs_warns_for_large_translations_of_camera_encodings():
    images, K, w2c = make_inputs(B=1, S=3)
    far = w2c.clone()
    far[..., :3, 3] *= 100.0
    prope = DepthModel(tiny_config(global_pe="prope"))
    with pytest.warns(UserWarning, match="not scale-invariant"):
        prope.check_inputs(images, K, far)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DepthModel(tiny_config(global_pe="rope")).check_inputs(images, K, far)  # RoPE reads no cameras
        DepthModel(tiny_config(global_pe="prope", pe_options={"max_translation": None})).check_inputs(
            images, K, far)


# --------------------------------------------------------------------------- backbone


def test_backbone_weights_file_and_download_errors(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    torch.manual_seed(1)
    src = build_backbone("vit_small_patch14_reg4_dinov2", num_blocks=2)
    save_file(src.state_dict(), str(tmp_path / "bb.safetensors"))
    torch.save({"model": src.state_dict()}, tmp_path / "bb.pt")
    for name in ("bb.safetensors", "bb.pt"):
        dst = build_backbone("vit_small_patch14_reg4_dinov2", weights_path=tmp_path / name, num_blocks=1)
        assert len(dst.blocks) == 1 and not any(p.requires_grad for p in dst.parameters())
        torch.testing.assert_close(dst.blocks[0].attn.qkv.weight, src.blocks[0].attn.qkv.weight)
        torch.testing.assert_close(dst.norm.weight, src.norm.weight)
    m = DepthModel(tiny_config(backbone_weights=str(tmp_path / "bb.safetensors")))
    torch.testing.assert_close(m.aggregator.patch_embed.pos_embed, src.pos_embed)
    with pytest.raises(BackboneWeightsError, match="do not match"):
        build_backbone("vit_base_patch14_reg4_dinov2", weights_path=tmp_path / "bb.safetensors", num_blocks=1)
    with pytest.raises(BackboneWeightsError, match="does not exist"):
        build_backbone("vit_small_patch14_reg4_dinov2", weights_path=tmp_path / "nope.pt")

    import timm

    def offline(*args, **kwargs):
        if kwargs.get("pretrained"):
            raise ConnectionError("no network")
        raise AssertionError("unexpected call")

    monkeypatch.setattr(timm, "create_model", offline)
    with pytest.raises(BackboneWeightsError, match="backbone_weights"):
        DepthModel(tiny_config(pretrained=True))


def test_an_unknown_backbone_name_or_unreadable_weights_are_named_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=re.escape("unknown timm backbone 'vit_tiny_patch14_dinov2'; use a DINOv2 "
                                                   "name such as 'vit_large_patch14_reg4_dinov2'")):
        build_backbone("vit_tiny_patch14_dinov2")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(BackboneWeightsError, match="could not read weights file .*bad.pt.*expected a .safetensors") as err:
        build_backbone("vit_small_patch14_reg4_dinov2", weights_path=tmp_path / "bad.pt", num_blocks=1)
    assert "\n" not in str(err.value)  # torch's own message is many lines: only its first is kept
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    with pytest.raises(BackboneWeightsError, match="list.pt' does not hold a state dict of tensors"):
        build_backbone("vit_small_patch14_reg4_dinov2", weights_path=tmp_path / "list.pt", num_blocks=1)


def test_backbone_output_is_final_norm_patch_tokens(model):
    vit = model.aggregator.patch_embed
    images = torch.rand(2, 3, H, W)
    from depthpe.model.backbone import backbone_patch_tokens

    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    tokens = backbone_patch_tokens(vit, images, mean, std)
    assert tokens.shape == (2, (H // 14) * (W // 14), vit.embed_dim)
    with torch.no_grad():
        ref = vit.norm(vit.blocks(vit._pos_embed(vit.patch_embed((images - mean) / std))))
    torch.testing.assert_close(tokens, ref[:, vit.num_prefix_tokens:])
    assert isinstance(model.aggregator.backbone_proj, torch.nn.Linear)  # 384 -> 128
    same = DepthModel(tiny_config(embed_dim=384, num_heads=12))
    assert isinstance(same.aggregator.backbone_proj, torch.nn.Identity)
    assert not any("backbone_proj" in k for k in same.state_dict())


# --------------------------------------------------------------------------- VGGT layout


def test_dpt_head_and_block_match_vggt_names_and_shapes():
    """Key names and shapes of VGGT-1B's depth head and aggregator blocks (VGGT's state-dict names)."""
    with torch.device("meta"):
        head = DPTHead(2048)
        block = AggregatorBlock(1024, 16)
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert len(shapes) == 62 and sum(v.numel() for v in head.state_dict().values()) == 32_654_562
    expect = {
        "norm.weight": (2048,),
        "projects.0.weight": (256, 2048, 1, 1),
        "projects.3.weight": (1024, 2048, 1, 1),
        "resize_layers.0.weight": (256, 256, 4, 4),
        "resize_layers.1.weight": (512, 512, 2, 2),
        "resize_layers.3.weight": (1024, 1024, 3, 3),
        "scratch.layer1_rn.weight": (256, 256, 3, 3),
        "scratch.layer4_rn.weight": (256, 1024, 3, 3),
        "scratch.refinenet1.resConfUnit1.conv1.weight": (256, 256, 3, 3),
        "scratch.refinenet4.resConfUnit2.conv2.bias": (256,),
        "scratch.refinenet3.out_conv.weight": (256, 256, 1, 1),
        "scratch.output_conv1.weight": (128, 256, 3, 3),
        "scratch.output_conv2.0.weight": (32, 128, 3, 3),
        "scratch.output_conv2.2.weight": (2, 32, 1, 1),
    }
    for k, v in expect.items():
        assert shapes[k] == v, k
    assert not any(k.startswith(("resize_layers.2", "scratch.refinenet4.resConfUnit1", "scratch.output_conv2.1")) for k in shapes)
    assert not any("bias" in k and "_rn" in k for k in shapes)
    bshapes = {k: tuple(v.shape) for k, v in block.state_dict().items()}
    assert bshapes == {
        "norm1.weight": (1024,), "norm1.bias": (1024,),
        "attn.qkv.weight": (3072, 1024), "attn.qkv.bias": (3072,),
        "attn.q_norm.weight": (64,), "attn.q_norm.bias": (64,),
        "attn.k_norm.weight": (64,), "attn.k_norm.bias": (64,),
        "attn.proj.weight": (1024, 1024), "attn.proj.bias": (1024,),
        "ls1.gamma": (1024,), "norm2.weight": (1024,), "norm2.bias": (1024,),
        "mlp.fc1.weight": (4096, 1024), "mlp.fc1.bias": (4096,),
        "mlp.fc2.weight": (1024, 4096), "mlp.fc2.bias": (1024,), "ls2.gamma": (1024,),
    }
    assert 24 * sum(v.numel() for v in block.state_dict().values()) == 302_364_672
    assert block.norm1.eps == 1e-5 and block.attn.q_norm.eps == 1e-5


def test_model_state_dict_prefixes(model):
    keys = model.state_dict().keys()
    assert {"aggregator.camera_token", "aggregator.register_token"} <= set(keys)
    assert model.aggregator.camera_token.shape == (1, 2, 1, 128)
    assert model.aggregator.register_token.shape == (1, 2, 4, 128)
    assert "aggregator.frame_blocks.3.ls2.gamma" in keys and "aggregator.global_blocks.0.attn.qkv.weight" in keys
    assert "aggregator.patch_embed.blocks.0.attn.qkv.weight" in keys  # timm DINOv2 keys
    assert "depth_head.scratch.output_conv2.2.bias" in keys
    assert torch.allclose(model.aggregator.frame_blocks[0].ls1.gamma, torch.full((128,), 0.01))


def test_residual_conv_unit_adds_relu_of_input():
    """VGGT's in-place ReLU quirk: the skip path carries ReLU(x), not x."""
    rcu = ResidualConvUnit(4)
    torch.nn.init.zeros_(rcu.conv2.weight)
    torch.nn.init.zeros_(rcu.conv2.bias)
    x = torch.randn(1, 4, 5, 5)
    torch.testing.assert_close(rcu(x), torch.relu(x))


def test_fusion_block_equals_vggt_order_of_resize_and_out_conv():
    """out_conv (1x1) before the bilinear resize equals VGGT's resize-then-conv (float64), and
    conv1x1 equals the Conv2d it applies; the head's activations stay channels-last."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    block = FeatureFusionBlock(8).double()
    x, skip = (torch.randn(2, 8, 5, 7, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
               for _ in range(2))
    for size in (None, (9, 11)):
        y = block.resConfUnit2(x + block.resConfUnit1(skip))
        y = F.interpolate(y, size=size or (10, 14), mode="bilinear", align_corners=True)
        ref = block.out_conv(y)
        got = block(x, skip, size=size)
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
        assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(conv1x1(block.out_conv, x), block.out_conv(x), rtol=1e-12, atol=1e-12)


def test_dpt_uv_pos_embed_values():
    grid = uv_grid(2, 3, aspect=1.5)
    diag = (1.5**2 + 1) ** 0.5
    torch.testing.assert_close(grid[0, :, 0], torch.tensor([-1, 0, 1]) * 1.5 / diag * 2 / 3)
    torch.testing.assert_close(grid[:, 0, 1], torch.tensor([-1, 1]) / diag * 1 / 2)
    emb = sincos_embed_2d(grid, 8)  # [sin(u w0), sin(u w1), cos(u w0), cos(u w1), same for v]
    u, v = grid[1, 2, 0].double(), grid[1, 2, 1].double()
    w = torch.tensor([1.0, 100.0**-0.5], dtype=torch.float64)
    ref = torch.cat([torch.sin(u * w), torch.cos(u * w), torch.sin(v * w), torch.cos(v * w)]).float()
    torch.testing.assert_close(emb[1, 2], ref)


def test_head_chunking_is_identical(model):
    images, K, w2c = make_inputs(B=1, S=3)
    head = model.depth_head
    with torch.no_grad():
        layers = model.aggregator(images, K, w2c)
        head.frames_chunk_size = 1
        a = head(layers, (H, W))
        head.frames_chunk_size = 0
        b = head(layers, (H, W))
        head.frames_chunk_size = 8
    torch.testing.assert_close(a[0], b[0])


def test_global_encoding_receives_qk_after_qk_norm(monkeypatch):
    """The camera transform must act on q/k AFTER the per-head q/k LayerNorm: with a fresh
    LayerNorm (weight 1, bias 0) each head's q and k handed to the encoding have zero mean and unit
    variance over head_dim. Moving the norm after the transform breaks this."""
    from depthpe.pe.base import Encoding

    seen = []
    real_attend = Encoding.attend

    def recording(self, q, k, v, **kw):
        seen.append((q.detach(), k.detach()))
        return real_attend(self, q, k, v, **kw)

    monkeypatch.setattr(Encoding, "attend", recording)
    torch.manual_seed(0)
    m = DepthModel(tiny_config(global_pe="prope")).eval()
    images, K, w2c = make_inputs(B=1, S=2)
    with torch.no_grad():
        m(images, K, w2c)
    T = 1 + m.config.num_register_tokens + (H // 14) * (W // 14)
    global_calls = [(q, k) for q, k in seen if q.shape[2] == 2 * T]  # frame calls hold T tokens
    assert len(global_calls) == m.config.num_blocks
    patch = torch.ones(2 * T, dtype=torch.bool)
    for s in range(2):  # special tokens start near zero (their LayerNorm variance is eps-limited)
        patch[s * T: s * T + 1 + m.config.num_register_tokens] = False
    for q, k in global_calls:
        for t in (q[:, :, patch], k[:, :, patch]):
            assert t.mean(-1).abs().max() < 1e-4
            torch.testing.assert_close(t.var(-1, unbiased=False), torch.ones_like(t[..., 0]), atol=1e-3, rtol=0)


def test_pair_global_pe_round_trips_config_json(tmp_path):
    cfg = tiny_config(global_pe={"vo": "KRtAdd2d", "qk": "p2d"}, pe_options={"rope_base": 50.0})
    cfg.to_json(tmp_path / "config.json")
    assert json.loads((tmp_path / "config.json").read_text())["global_pe"] == {"qk": "p2d", "vo": "KRtAdd2d"}
    assert DepthModelConfig.from_json(tmp_path / "config.json") == cfg


def test_plucker_rays_and_zero_initialised_embedding():
    from depthpe.model.plucker import plucker_rays

    gen = torch.Generator().manual_seed(0)
    R = random_rotation(gen)
    w2c = torch.eye(4, dtype=torch.float64).repeat(1, 1, 1, 1)
    w2c[0, 0, :3, :3], w2c[0, 0, :3, 3] = R, torch.tensor([0.2, -0.1, 0.5], dtype=torch.float64)
    K = torch.tensor([[20.0, 0, 3.0], [0, 20.0, 2.0], [0, 0, 1]], dtype=torch.float64).expand(1, 1, 3, 3)
    rays = plucker_rays(K, w2c, (5, 7))[0, 0]  # (6, H, W)
    centre = -R.T @ w2c[0, 0, :3, 3]
    torch.testing.assert_close(rays[:3, 2, 3], R.T @ torch.tensor([0.0, 0, 1], dtype=torch.float64))
    torch.testing.assert_close(rays[:3].norm(dim=0), torch.ones(5, 7, dtype=torch.float64))
    d = rays[:3, 4, 6]
    torch.testing.assert_close(rays[3:, 4, 6], torch.linalg.cross(centre, d))
    # Zero-initialised: the model starts exactly as without it; the embedding learns.
    torch.manual_seed(0)
    plain = DepthModel(tiny_config(global_pe={"qk": "p2d", "vo": "pIT2d"})).train()
    with_rays = DepthModel(tiny_config(global_pe={"qk": "p2d", "vo": "pIT2d"}, plucker=True)).train()
    with_rays.load_state_dict(plain.state_dict(), strict=False)
    images, K, w2c = make_inputs(B=1, S=2)
    out = with_rays(images, K, w2c)["depth"]
    assert torch.equal(out, plain(images, K, w2c)["depth"])
    out.mean().backward()
    assert with_rays.aggregator.plucker.proj.weight.grad.abs().sum() > 0


def test_plucker_embedding_is_added_to_the_patch_tokens():
    # the sign matters for checkpoints: a trained embedding subtracted would silently flip its effect
    torch.manual_seed(0)
    plain = DepthModel(tiny_config(global_pe={"qk": "p2d", "vo": "pIT2d"})).eval()
    with_rays = DepthModel(tiny_config(global_pe={"qk": "p2d", "vo": "pIT2d"}, plucker=True)).eval()
    with_rays.load_state_dict(plain.state_dict(), strict=False)
    torch.nn.init.normal_(with_rays.aggregator.plucker.proj.weight)
    torch.nn.init.normal_(with_rays.aggregator.plucker.proj.bias)
    images, K, w2c = make_inputs(B=1, S=2)
    first_block_inputs = []
    for model in (plain, with_rays):
        hook = model.aggregator.frame_blocks[0].register_forward_pre_hook(
            lambda module, args: first_block_inputs.append(args[0]))
        with torch.no_grad():
            model.aggregator(images, K, w2c)
        hook.remove()
    ns = with_rays.aggregator.num_special
    with torch.no_grad():
        offsets = with_rays.aggregator.plucker(K, w2c, tuple(images.shape[-2:]))
    assert offsets.abs().amax() > 0.1
    torch.testing.assert_close(first_block_inputs[1][:, ns:] - first_block_inputs[0][:, ns:], offsets)
    torch.testing.assert_close(first_block_inputs[1][:, :ns], first_block_inputs[0][:, :ns])  # not on special tokens


def test_a_long_list_of_mismatched_keys_shows_twenty_and_the_count():
    model = DepthModel(tiny_config())
    extra = {f"extra.{i:02d}": torch.zeros(1) for i in range(25)}
    with pytest.raises(CheckpointMismatchError) as err:
        model.load_weights({**model.state_dict(), **extra})
    message = str(err.value)
    assert "'extra.19'" in message and "'extra.20'" not in message and "... (25 in all)" in message
    twenty = {f"extra.{i:02d}": torch.zeros(1) for i in range(20)}
    with pytest.raises(CheckpointMismatchError) as err:
        model.load_weights({**model.state_dict(), **twenty})
    assert "'extra.19'" in str(err.value) and "in all" not in str(err.value)  # all shown: no count
