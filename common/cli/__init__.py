"""The ``gpusm`` command line of the shared layer (:mod:`.main`: match, generate, info, convert,
engines) and kernel warm-up (:mod:`.warmup`)."""
