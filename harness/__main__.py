"""python -m harness --config=gelu.yaml [--config.KEY=VALUE ...]: run one study.

Overrides address any config key by its dotted path; a variant is addressed by its name:
    --config.problem.m=64 --config.variants.xla_no_fusion.xla_options.xla_disable_hlo_passes=fusion
"""

from harness.capture.environment import prepare_process_dump

# XLA reads XLA_FLAGS once, when its backend starts: set the eager dump folder before jax loads.
prepare_process_dump()

from harness import main  # noqa: E402

if __name__ == "__main__":
    main.start()
