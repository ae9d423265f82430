"""Server sides of the methods (one module per method family; importing one registers its methods).

The package's metadata names, once, the module that registers each built-in method
(``pyproject.toml``, entry-point group ``fedcausal_flwr.methods``), so a run imports only the
module of the method it runs (``registry.get_method``); listing every method (``known_methods()``,
``builtin_methods()``) imports them all. A test checks the entry points against what the modules
register.

No method module imports another's (a test reads the imports): what methods share has a module
of its own that registers nothing: :mod:`.discrete` (the discrete-test methods' options and
level sets as a part, the pooled oracle), :mod:`.layer_vote` (the layer loop of fedpc-vote and
FedECD), :mod:`.search` (PC's or FCI's search over a federated CI test: FedPC/FedFCI and
fedCI-PC/-FCI), the federated CI tests (:mod:`.ci_tests`, the interface; :mod:`.table_tests`,
:mod:`.moment_tests` and :mod:`.glm_tests`, the latter also held by fedCI-IOD),
:mod:`.shared_options` (options several methods declare alike) and :mod:`.base`. The client side
mirrors it (``clients/discrete.py``, ``clients/glm_tests.py``, ``clients/base.py``).
"""
