"""Differential privacy, in one place (Flower-free).

* :mod:`.accounting` - zCDP and its conversions, the run's accountant, a release's noise and cost;
* :mod:`.pld` - the releases' privacy loss distributions, composed by ``dp_accounting``;
* :mod:`.sampler` - the discrete Gaussian the server and the sites draw;
* :mod:`.charges` - the plan a private run sends with ``hello`` and the charge on each request;
* :mod:`.server_noise` - the server's side of a private run, a part of the strategies that sum;
* :mod:`.site_budget` - a site's side: what it counts each release as, and what it can afford.

The protocol core's guard (:mod:`fedcausal_flwr.federation.core.site_guard`) applies a site's
budget to every message; the clients add their noise shares with :mod:`.sampler`. What each
part guarantees, and why, is in docs/privacy.md.
"""
