"""configs/accelerate/*.yaml: accelerate (1.15) parses them as `accelerate launch --config_file` does,
every key is one accelerate knows, and the FSDP2 file wraps what its comments say."""


import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import launch_command_parser
from accelerate.utils import DistributedType
from tests.helpers.accelerate import CONFIG_DIR, launch_args

EXPECTED = {
    "ddp.yaml": DistributedType.MULTI_GPU,
    "fsdp2.yaml": DistributedType.FSDP,
    "deepspeed_zero2.yaml": DistributedType.DEEPSPEED,
}




def test_every_shipped_file_is_tested():
    assert sorted(p.name for p in CONFIG_DIR.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_parses_with_accelerates_loader(name):
    cfg = load_config_from_file(str(CONFIG_DIR / name))  # raises on unknown top-level keys
    assert isinstance(cfg, ClusterConfig)
    assert cfg.distributed_type == EXPECTED[name]
    assert cfg.mixed_precision == "bf16" and cfg.num_processes == 8 and cfg.num_machines == 1
    assert not cfg.use_cpu
    # nested keys are copied onto launch arguments without a check: each must be a real one
    known = {action.dest for action in launch_command_parser()._actions}
    for section in (cfg.fsdp_config, cfg.deepspeed_config):
        unknown = sorted(set(section or {}) - known)
        assert not unknown, f"{name}: keys accelerate launch does not know: {unknown}"


def test_launch_arguments_from_the_files():
    ddp = launch_args("ddp.yaml")
    assert ddp.multi_gpu and ddp.num_processes == 8 and ddp.mixed_precision == "bf16"
    ds = launch_args("deepspeed_zero2.yaml")
    assert ds.use_deepspeed and ds.zero_stage == 2 and ds.gradient_clipping == 1.0
    assert ds.offload_optimizer_device == "none" and ds.gradient_accumulation_steps == 1
    fsdp = launch_args("fsdp2.yaml")
    assert fsdp.use_fsdp and fsdp.fsdp_version == 2 and fsdp.fsdp_auto_wrap_policy == "TRANSFORMER_BASED_WRAP"


def test_fsdp2_plugin_wraps_the_backbone_blocks_and_no_container(monkeypatch):
    """Build accelerate's FSDP plugin from the environment the launcher would set, and ask its FSDP2
    auto-wrap policy which modules of a (micro) DepthModel become units: the frozen backbone's blocks
    (timm's `Block`) and every frame/global block of the aggregator (`AggregatorBlock`), never a
    ModuleList."""
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
    from accelerate.utils.launch import prepare_multi_gpu_env

    from depthpe.model import DepthModel
    from depthpe.run import RunConfig
    from tests.helpers.training import MICRO_MODEL

    for key, value in prepare_multi_gpu_env(launch_args("fsdp2.yaml")).items():
        monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    model = DepthModel(RunConfig.from_dict({"model": {**MICRO_MODEL, "backbone_blocks": 2}}).model_config(),
                       load_backbone_weights=False)
    plugin.set_auto_wrap_policy(model)
    policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
    wrapped = [name for name, module in model.named_modules() if policy(module)]
    n = model.config.num_blocks
    assert wrapped == (["aggregator.patch_embed.blocks.0", "aggregator.patch_embed.blocks.1"]
                       + [f"aggregator.{kind}_blocks.{i}" for kind in ("frame", "global") for i in range(n)])
    assert not any(policy(m) for m in model.modules() if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)))
    backbone = [name for name in wrapped if name.startswith("aggregator.patch_embed.")]
    assert all(not p.requires_grad for name in backbone for p in model.get_submodule(name).parameters())
