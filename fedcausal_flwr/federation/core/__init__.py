"""The protocol core: Flower-free, unit-tested without Flower (``tests/test_architecture.py``
checks that nothing here imports Flower).

* :mod:`.protocol` - ``ProtocolStrategy`` (what a method implements) and ``ProtocolRun`` (the
  state machine driving it: hello, rounds, dropouts, result).
* :mod:`.membership` - node ids <-> partition ids, clients alive, hello reports, dropouts.
* :mod:`.messages` - Request / Reply / ClientInfo, wire keys, errors, SecAgg+ exact-sum bounds.
* :mod:`.sums` - exact integer sums, plain or decoded from SecAgg+'s mean.
* :mod:`.bookkeeping` - round log, bytes, dropouts, privacy ledger.
* :mod:`.registry` - methods, their declared options, client classes, disclosures and hooks.
* :mod:`.input_checks` - one input check for every method, on the sites' hello reports.
* :mod:`.bootstrap` - the federated bootstrap (a method on the rows and on B resamples).
* :mod:`.disclosure` - the four classes of what a client action discloses.
* :mod:`.site_policy` - a site's policy, the guard every reply passes, the site's audit log.
* :mod:`.site_cache` - a site's data file as read and checked, kept between messages.
* :mod:`.coordinator` - the folders a coordinator reads and writes (result-path, truth, plugins).
"""
