"""The GPU runtime every engine shares: backend choice (:mod:`.backend`), the simulator-aware
``cuda`` module (:mod:`.runtime`), kernel launch and its on-disk cache (:mod:`.launch`,
:mod:`.kernel_cache`), device-timed phases (:mod:`.timers`), the memory budget and buffer pool
(:mod:`.budget`, :mod:`.pool`), checked copies (:mod:`.copies`), the launch watch that stops a
kernel at a deadline (:mod:`.watch`), block-wide scans (:mod:`.scan`) and shared device functions
(:mod:`.device_functions`). Above graph data, below the engine API."""
