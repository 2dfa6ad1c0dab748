"""python -m harness --config=gelu.yaml [--config.KEY=VALUE ...]: run one study.

Overrides address any config key by its dotted path; a variant is addressed by its name:
    --config.problem.m=64 --config.variants.xla_no_fusion.xla_options.xla_disable_hlo_passes=fusion
"""

from harness import main

if __name__ == "__main__":
    main.start()
