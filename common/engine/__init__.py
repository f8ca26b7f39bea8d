"""The engine contract: the base class (:mod:`.base`), the registry and :func:`create_engine`
(:mod:`.registry`), results (:mod:`.result`) and the option descriptions ``gpusm engines`` prints
(:mod:`.describe`). Above graph data and the GPU runtime; the engines, the CPU matchers,
distribution and the CLI build on it."""
