"""Frontends: the frameworks a study's variants run in (JAX, PyTorch, or one a test plugs in).

    modes       what a mode is, as data (`Mode`), and what the analysis and the report say
                about a framework's variants (`Traits`): a library, no JAX
    registry    `Frontend` (the protocol), `register(frontend)`, `get(name)`, `mode(name)`;
                the built-in frontends and `HARNESS_FRONTENDS` plug-ins, loaded by name
    jax, torch  the two built-in frontends: their modes, and the capture, timing and analysis
                they delegate to (harness.capture, harness.timing, harness.analyze)

The worker, the timing and the analysis do not ask which framework a variant is: they ask
the variant's frontend (`registry.get(variant.framework)`) and read its mode's record
(`variant.mode_spec`); the rules and the report read its traits (`registry.traits(name)`).
This package's own __init__ imports nothing, so a library may import `harness.frontends.modes`
and `harness.frontends.registry` without taking the stages the built-ins delegate to.
"""
