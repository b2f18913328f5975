"""Tests of depthpe.model.vggt_weights / DepthModel.from_vggt: loading VGGT-format checkpoints.

The checkpoints are small random VGGT-format state dicts built here (nothing is downloaded): the key
list comes from depthpe's own model, translated to VGGT's backbone names by an independent table
(the mapping of docs/vggt-weights.md), plus VGGT's camera/point/track head keys, which must be ignored.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from depthpe import DepthModel
from depthpe.model.vggt_weights import (
    VGGTWeightsError,
    backbone_vggt_to_timm,
    depthpe_to_vggt,
    describe_vggt_state_dict,
    load_vggt_weights,
    resolve_vggt_file,
    vggt_to_depthpe,
)
from depthpe.pe import available_encodings

# A reduced VGGT: DINOv2 ViT-S/14-reg (1 block) whose width equals embed_dim (VGGT has no projection),
# 4 frame + 4 global blocks, DPT with features >= 64 (VGGT's last hidden conv is 32 wide).
SMALL = dict(backbone="vit_small_patch14_reg4_dinov2", backbone_blocks=1, pretrained=False, embed_dim=384,
             num_blocks=4, num_heads=6, head_features=64, head_out_channels=[16, 32, 64, 64],
             head_layers=[0, 1, 2, 3])
H, W = 28, 42  # 2 x 3 patches
BB = "aggregator.patch_embed."

# The test's own VGGT <-> timm name table for the backbone; everything else keeps its name.
VGGT_NAME = {"reg_token": "register_tokens"}
HEAD_KEYS = {  # a sample of VGGT's other heads: all must be ignored
    "camera_head.token_norm.weight": (768,),
    "camera_head.empty_pose_tokens": (1, 1, 9),
    "camera_head.trunk.0.attn.qkv.weight": (2304, 768),
    "camera_head.poseLN_modulation.1.weight": (2304, 768),
    "camera_head.pose_branch.fc2.bias": (9,),
    "track_head.feature_extractor.norm.weight": (768,),
    "track_head.tracker.query_ref_token": (1, 2, 8),
    "track_head.tracker.updateformer.time_blocks.0.attn.qkv.weight": (12, 4),
}


def _vggt_layout(model: DepthModel) -> dict[str, tuple]:
    """{VGGT key: shape} of a VGGT checkpoint matching ``model``."""
    layout = {}
    for k, v in model.state_dict().items():
        shape = tuple(v.shape)
        if k.startswith(BB):
            name = k[len(BB):]
            if name == "pos_embed":
                shape = (1, shape[1] + 1, shape[2])  # DINOv2 keeps a position entry for the cls token
            layout[BB + VGGT_NAME.get(name, name)] = shape
        else:
            layout[k] = shape
    layout[BB + "mask_token"] = (1, layout[BB + "cls_token"][-1])
    for k, shape in list(layout.items()):
        if k.startswith("depth_head."):  # the point head is a DPT head with 4 outputs
            layout["point_head." + k[len("depth_head."):]] = (4, *shape[1:]) if k.endswith("output_conv2.2.weight") \
                else (4,) if k.endswith("output_conv2.2.bias") else shape
    layout.update(HEAD_KEYS)
    return layout


def _random_checkpoint(layout: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for k, shape in layout.items():
        t = torch.randn(shape, generator=g)
        fan_in = t[0].numel() if t.ndim >= 2 else 1
        sd[k] = t / fan_in ** 0.5 if t.ndim >= 2 and not k.endswith(("token", "tokens", "pos_embed")) else 0.3 * t
    sd["depth_head.scratch.output_conv2.2.bias"] = torch.zeros(2)
    return sd


def _inputs(S: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(1, S, 3, H, W, generator=g)
    K = torch.tensor([[40.0, 0, W / 2], [0, 40.0, H / 2], [0, 0, 1]]).expand(1, S, 3, 3)
    w2c = torch.eye(4)[:3].expand(1, S, 3, 4).clone()
    w2c[0, 1:, 0, 3] = 1.0  # views 1.. moved along x (the camera encodings need a baseline)
    return images, K, w2c


@pytest.fixture(scope="module")
def base():
    """(model built from SMALL, the VGGT layout, a random VGGT checkpoint)."""
    torch.manual_seed(0)
    model = DepthModel(SMALL).eval()
    layout = _vggt_layout(model)
    return model, layout, _random_checkpoint(layout)


@pytest.fixture(scope="module")
def ckpt_file(base, tmp_path_factory):
    path = tmp_path_factory.mktemp("vggt") / "model.safetensors"
    save_file(base[2], str(path))
    return path


def _expected_depthpe(src: dict) -> dict:
    """What every depthpe tensor must hold after loading ``src``, written out key by key."""
    exp = {}
    for k, v in src.items():
        if k.startswith(("camera_head.", "point_head.", "track_head.")) or k == BB + "mask_token":
            continue
        if k == BB + "register_tokens":
            exp[BB + "reg_token"] = v
        elif k == BB + "pos_embed":
            exp[BB + "pos_embed"] = v[:, 1:]
        elif k == BB + "cls_token":
            exp[BB + "cls_token"] = v + src[BB + "pos_embed"][:, :1]
        else:
            exp[k] = v
    return exp


# ------------------------------------------------------------------------------------------- tests
def test_from_vggt_puts_every_tensor_in_its_place(base, ckpt_file):
    _, layout, src = base
    model = DepthModel.from_vggt(str(ckpt_file), **SMALL)
    state = model.state_dict()
    expected = _expected_depthpe(src)
    assert state.keys() == expected.keys()  # nothing missing, nothing extra, heads absent
    bad = [k for k in expected if not torch.equal(state[k], expected[k])]
    assert not bad, bad
    assert not model.training and not any(p.requires_grad for p in model.aggregator.patch_embed.parameters())
    assert len(layout) > len(state)  # the checkpoint really had head keys to ignore


def test_pt_file_folder_and_nested_state_dict_load_the_same(base, ckpt_file, tmp_path):
    _, _, src = base
    ref = DepthModel.from_vggt(str(ckpt_file), **SMALL).state_dict()
    folder = tmp_path / "ckpt"
    folder.mkdir()
    torch.save(src, folder / "model.pt")
    torch.save({"model": src}, tmp_path / "train_ckpt.pt")  # VGGT's training checkpoints nest it
    for where in (folder / "model.pt", folder, tmp_path / "train_ckpt.pt"):
        state = DepthModel.from_vggt(str(where), **SMALL).state_dict()
        assert all(torch.equal(state[k], ref[k]) for k in ref), where


def test_backbone_mapping_is_timms_dinov2_conversion_bit_exactly(base):
    """The mapped backbone equals timm's own DINOv2 converter on the unmapped weights, and timm's
    token sequence equals DINOv2's [cls + pos[0], registers (no position), patches + pos[1:]]."""
    from timm.models.vision_transformer import _convert_dinov2

    model, _, src = base
    raw = {k[len(BB):]: v.clone() for k, v in src.items() if k.startswith(BB)}
    ours = backbone_vggt_to_timm(raw)
    theirs = _convert_dinov2(dict(raw), model.aggregator.patch_embed)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert raw.keys() == {k[len(BB):] for k in src if k.startswith(BB)}  # input left untouched

    vit = model.aggregator.patch_embed
    load_vggt_weights(model, src)
    x = torch.rand(1, 3, 518, 518, generator=torch.Generator().manual_seed(3))  # 37 x 37: no resampling
    with torch.no_grad():
        patches = vit.patch_embed(x)  # (1, 37, 37, C) with dynamic_img_size
        timm_tokens = vit._pos_embed(patches)
        flat = patches.reshape(1, -1, patches.shape[-1])
        dinov2 = torch.cat([raw["cls_token"] + raw["pos_embed"][:, :1], raw["register_tokens"],
                            flat + raw["pos_embed"][:, 1:]], dim=1)
    assert torch.equal(timm_tokens, dinov2)


def test_each_source_tensor_lands_in_place_and_drives_the_output(base):
    """Perturb one source tensor per module type: exactly the expected depthpe tensor changes, and
    the output changes; perturbing the ignored heads or DINOv2's mask token changes nothing."""
    model, _, src = base
    images, K, w2c = _inputs()
    load_vggt_weights(model, src)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        ref = model(images, K, w2c)["depth"]
    used = {
        BB + "patch_embed.proj.weight": [BB + "patch_embed.proj.weight"],
        BB + "cls_token": [BB + "cls_token"],
        BB + "register_tokens": [BB + "reg_token"],
        BB + "blocks.0.attn.qkv.weight": [BB + "blocks.0.attn.qkv.weight"],
        BB + "blocks.0.ls2.gamma": [BB + "blocks.0.ls2.gamma"],
        BB + "norm.bias": [BB + "norm.bias"],
        "aggregator.camera_token": ["aggregator.camera_token"],
        "aggregator.register_token": ["aggregator.register_token"],
        "aggregator.frame_blocks.0.attn.q_norm.weight": ["aggregator.frame_blocks.0.attn.q_norm.weight"],
        "aggregator.frame_blocks.2.ls1.gamma": ["aggregator.frame_blocks.2.ls1.gamma"],
        "aggregator.global_blocks.1.attn.k_norm.bias": ["aggregator.global_blocks.1.attn.k_norm.bias"],
        "aggregator.global_blocks.3.mlp.fc2.weight": ["aggregator.global_blocks.3.mlp.fc2.weight"],
        "depth_head.norm.weight": ["depth_head.norm.weight"],
        "depth_head.projects.1.weight": ["depth_head.projects.1.weight"],
        "depth_head.resize_layers.0.weight": ["depth_head.resize_layers.0.weight"],
        "depth_head.resize_layers.3.bias": ["depth_head.resize_layers.3.bias"],
        "depth_head.scratch.layer4_rn.weight": ["depth_head.scratch.layer4_rn.weight"],
        "depth_head.scratch.refinenet4.resConfUnit2.conv1.weight": ["depth_head.scratch.refinenet4.resConfUnit2.conv1.weight"],
        "depth_head.scratch.refinenet1.resConfUnit1.conv2.bias": ["depth_head.scratch.refinenet1.resConfUnit1.conv2.bias"],
        "depth_head.scratch.refinenet2.out_conv.weight": ["depth_head.scratch.refinenet2.out_conv.weight"],
        "depth_head.scratch.output_conv1.weight": ["depth_head.scratch.output_conv1.weight"],
        "depth_head.scratch.output_conv2.2.weight": ["depth_head.scratch.output_conv2.2.weight"],
    }
    pos = BB + "pos_embed"
    ignored = [BB + "mask_token", "camera_head.trunk.0.attn.qkv.weight", "point_head.norm.weight",
               "point_head.scratch.output_conv2.2.weight", "track_head.feature_extractor.norm.weight"]
    cases = [(k, None, names) for k, names in used.items()]
    cases += [(pos, 0, [BB + "cls_token"]), (pos, 1, [pos])]  # the cls entry of pos_embed folds into cls_token
    cases += [(k, None, []) for k in ignored]
    for key, pos_row, names in cases:
        changed_src = dict(src)
        t = src[key].clone()
        if pos_row is None:
            t += 0.5 * torch.randn_like(t)
        else:
            t[:, pos_row] += 0.5
        changed_src[key] = t
        load_vggt_weights(model, changed_src)
        after = model.state_dict()
        assert sorted(k for k in after if not torch.equal(after[k], before[k])) == sorted(names), key
        with torch.no_grad():
            out = model(images, K, w2c)["depth"]
        assert torch.equal(out, ref) == (not names), key
    load_vggt_weights(model, src)


def test_mismatches_fail_loudly_and_load_nothing(base):
    model, _, src = base
    load_vggt_weights(model, src)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bad_cases = {
        "missing": {k: v for k, v in src.items() if k != "aggregator.global_blocks.2.attn.proj.bias"},
        "unexpected": {**src, "aggregator.frame_blocks.7.norm1.weight": torch.ones(384)},
        "extra backbone block": {**src, BB + "blocks.1.norm1.weight": torch.ones(384)},
        "shape": {**src, "depth_head.projects.0.weight": torch.zeros(8, 768, 1, 1)},
    }
    for what, sd in bad_cases.items():
        with pytest.raises(VGGTWeightsError, match="does not fit the model") as err:
            load_vggt_weights(model, {k: v + 1 if k == "aggregator.camera_token" else v for k, v in sd.items()})
        assert "embed_dim" in str(err.value) and "from_vggt" in str(err.value), what
        state = model.state_dict()
        assert all(torch.equal(state[k], before[k]) for k in before), what  # nothing was loaded
    with pytest.raises(VGGTWeightsError, match="not a VGGT checkpoint.*'backbone.norm.weight'"):
        vggt_to_depthpe({**src, "backbone.norm.weight": torch.ones(384)})


def test_wrong_architecture_names_the_checkpoint_sizes(ckpt_file):
    with pytest.raises(VGGTWeightsError) as err:
        DepthModel.from_vggt(str(ckpt_file), **{**SMALL, "num_blocks": 5, "head_layers": [0, 1, 2, 4]})
    msg = str(err.value)
    assert "'num_blocks': 4" in msg and "num_blocks=5" in msg and "aggregator.frame_blocks.4" in msg


def test_describe_reads_the_architecture_off_the_shapes(base):
    _, _, src = base
    assert describe_vggt_state_dict(src) == dict(embed_dim=384, num_blocks=4, backbone_blocks=1, backbone_dim=384,
                                                 head_features=64, head_out_channels=[16, 32, 64, 64])


def test_any_global_pe_loads_the_same_weights(base, ckpt_file):
    ref = DepthModel.from_vggt(str(ckpt_file), **SMALL).state_dict()
    models = {}
    for pe in available_encodings():
        models[pe] = DepthModel.from_vggt(str(ckpt_file), **{**SMALL, "global_pe": pe})
        state = models[pe].state_dict()
        assert state.keys() == ref.keys() and all(torch.equal(state[k], ref[k]) for k in ref), pe
        assert models[pe].config.global_pe == pe
    with torch.no_grad():  # a camera encoding runs on VGGT's weights
        out = models["prope"](*_inputs())
    assert torch.isfinite(out["depth"]).all() and (out["depth"] > 0).all()


def test_depthpe_to_vggt_roundtrip_keeps_outputs(base, tmp_path):
    model, layout, src = base
    load_vggt_weights(model, src)
    exported = depthpe_to_vggt(model.state_dict())
    assert {k: tuple(v.shape) for k, v in exported.items()} == {k: s for k, s in layout.items()
                                                                if k.startswith(("aggregator.", "depth_head."))}
    save_file(exported, str(tmp_path / "export.safetensors"))
    again = DepthModel.from_vggt(str(tmp_path / "export.safetensors"), **SMALL)
    images, K, w2c = _inputs()
    with torch.no_grad():
        assert torch.equal(again(images, K, w2c)["depth"], model(images, K, w2c)["depth"])
    with pytest.raises(VGGTWeightsError, match="backbone width to equal embed_dim"):
        depthpe_to_vggt(DepthModel.from_preset("tiny").state_dict())  # tiny projects 384 -> 128


def test_missing_file_and_offline_hub_give_actionable_errors(tmp_path):
    with pytest.raises(VGGTWeightsError, match="does not exist"):
        resolve_vggt_file(tmp_path / "nope.safetensors")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VGGTWeightsError, match="neither of"):
        resolve_vggt_file(tmp_path / "empty")
    # conftest sets HF_HUB_OFFLINE=1: the download fails, the message says how to get the file by hand
    with pytest.raises(VGGTWeightsError, match=r"hf download facebook/VGGT-1B model.safetensors.*init_from"):
        DepthModel.from_vggt("facebook/VGGT-1B")


def test_hub_id_falls_back_to_model_pt(base, tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    _, _, src = base
    torch.save(src, tmp_path / "model.pt")
    calls = []

    def fake_download(repo_id, filename, **kwargs):  # a repo holding only model.pt
        calls.append((repo_id, filename, kwargs.get("revision")))
        if filename != "model.pt":
            raise EntryNotFoundError(f"Entry {filename} not found")
        return str(tmp_path / "model.pt")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    model = DepthModel.from_vggt("someone/small-vggt", revision="v1", **SMALL)
    assert calls == [("someone/small-vggt", "model.safetensors", "v1"), ("someone/small-vggt", "model.pt", "v1")]
    state, expected = model.state_dict(), _expected_depthpe(src)
    assert all(torch.equal(state[k], expected[k]) for k in expected)

    def broken(repo_id, filename, **kwargs):  # network trouble: no second try, an actionable error
        calls.append(filename)
        raise ConnectionError("no route to host")

    calls.clear()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    with pytest.raises(VGGTWeightsError, match="ConnectionError: no route to host.*copy it over"):
        DepthModel.from_vggt("someone/small-vggt", **SMALL)
    assert calls == ["model.safetensors"]


def test_training_config_init_from(base, ckpt_file, monkeypatch):
    from depthpe.run import RunConfig
    from depthpe.hub.card import init_weights_release
    from depthpe.run.building import build_model

    cfg = RunConfig.from_dict({"model": {**SMALL, "init_from": str(ckpt_file)}})
    assert "init_from" not in cfg.model_config().to_dict()
    model = build_model(cfg)
    expected = _expected_depthpe(base[2])
    assert all(torch.equal(model.state_dict()[k], expected[k]) for k in expected)
    assert init_weights_release(cfg.model.init_from) is None  # a local file: the card cannot know its release
    # resuming: the run's checkpoint restores the weights, so the VGGT file is not read
    monkeypatch.setattr(DepthModel, "from_vggt", classmethod(lambda *a, **k: pytest.fail("read VGGT file")))
    assert isinstance(build_model(cfg, resuming=True), DepthModel)
    hub_cfg = RunConfig.from_dict({"model": {"preset": "vggt-1b", "init_from": "facebook/VGGT-1B"}})
    assert init_weights_release(hub_cfg.model.init_from) == "facebook/VGGT-1B" and hub_cfg.model_config().embed_dim == 1024


def test_head_reading_one_block_twice_loads_and_reproduces_the_checkpoint(tmp_path):
    """VGGT accepts non-decreasing intermediate_layer_idx such as [0, 1, 1, 1] (2 blocks)."""
    cfg = {**SMALL, "num_blocks": 2, "head_layers": [0, 1, 1, 1]}
    torch.manual_seed(0)
    src = _random_checkpoint(_vggt_layout(DepthModel(cfg)), seed=3)
    save_file(src, str(tmp_path / "model.safetensors"))
    loaded = DepthModel.from_vggt(str(tmp_path / "model.safetensors"), **cfg)
    reference = DepthModel(cfg).eval()
    reference.load_state_dict(_expected_depthpe(src))  # the checkpoint's tensors, placed by the test
    images, K, w2c = _inputs()
    with torch.no_grad():
        feats = loaded.aggregator(images, K, w2c)
        assert torch.equal(loaded(images, K, w2c)["depth"], reference(images, K, w2c)["depth"])
    assert torch.equal(feats[1], feats[2]) and torch.equal(feats[1], feats[3])
    assert not torch.equal(feats[0], feats[1])
    with pytest.raises(ValueError, match="non-decreasing"):
        DepthModel.from_vggt(str(tmp_path / "model.safetensors"), **{**cfg, "head_layers": [0, 1, 0, 1]})
    with pytest.raises(ValueError, match=r"must lie in \[0, num_blocks\)"):
        DepthModel.from_vggt(str(tmp_path / "model.safetensors"), **{**cfg, "head_layers": [0, 1, 1, 2]})


def test_plucker_embedding_stays_zero_and_says_so(ckpt_file):
    with pytest.warns(UserWarning, match="Plücker.*zero initialisation"):
        model = DepthModel.from_vggt(str(ckpt_file), **SMALL, plucker=True)
    assert not model.aggregator.plucker.proj.weight.any() and not model.aggregator.plucker.proj.bias.any()
    plain = DepthModel.from_vggt(str(ckpt_file), **SMALL)
    images, K, w2c = _inputs()
    with torch.no_grad():
        assert torch.equal(model(images, K, w2c)["depth"], plain(images, K, w2c)["depth"])
