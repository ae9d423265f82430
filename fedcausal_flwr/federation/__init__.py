"""The protocol core, the Flower runtime around it, and the tooling of a real deployment.

Three folders, imports going downwards (``tests/test_architecture.py`` checks it):

* :mod:`.core` - Flower-free: what a method implements, the run that drives it, the registry,
  the checks, the site's policy and the bookkeeping. Unit-tested without Flower.
* :mod:`.runtime` - Flower: the apps every method runs in, the in-process grid, the Ray runner
  and the one adapter to Flower's internals.
* :mod:`.deployment` - a federation of SuperLink and SuperNodes: the local deployment, its
  credentials, the tuned SuperNode and the warm ClientApp executor.

Each folder's module map names every module in it.
"""
