"""What an exact discrete Gaussian sampler would cost a private run: OpenDP's against ours.

Ours (:func:`fedcausal_flwr.privacy.sampler.discrete_gaussian`) follows Canonne, Kamath and
Steinke's rejection sampler in floating point (numpy); OpenDP's ``make_gaussian`` on integer
vectors samples the same distribution exactly (rational arithmetic; in OpenDP 0.16 it needs its
``contrib`` feature). One private FedPC run (``dp=central``, epsilon 8, delta 1e-6, default two
batches) on ``--network`` x ``--rows`` over ``--clients`` sites records every noise draw it makes
(variance and cells); the same draws are then made with OpenDP's sampler. Printed: the run's wall
seconds, the cells drawn, each sampler's seconds and its share of the run, the ratio OpenDP /
ours, and both samples' variance against the parameter.

    python experiments/bench_sampler.py [--network alarm] [--rows 100000] [--clients 10]

OpenDP is not a dependency of the package: ``pip install opendp`` to run this.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="alarm")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=10)
    args = parser.parse_args()
    try:
        import opendp.prelude as opendp
    except ImportError:
        parser.error("OpenDP is not installed: pip install opendp")

    import fedcausal_flwr
    import fedcausal_flwr.privacy.server_noise as server_noise
    from fedcausal_flwr.data import load_network
    from fedcausal_flwr.data.partition import split_iid

    draws: list[tuple[float, int]] = []
    ours_seconds = 0.0
    sampler = server_noise.discrete_gaussian

    def recorded(variance: float, size: int, rng: np.random.Generator) -> np.ndarray:
        nonlocal ours_seconds
        started = time.perf_counter()
        noise = sampler(variance, size, rng)
        ours_seconds += time.perf_counter() - started
        draws.append((variance, size))
        return noise

    net = load_network(args.network)
    sites = split_iid(net.sample(args.rows, seed=0), args.clients, seed=0).clients
    server_noise.discrete_gaussian = recorded
    try:
        result = fedcausal_flwr.run(
            "fedpc", data=sites, dp="central", dp_epsilon=8, dp_delta=1e-6, dp_noise_seed=0
        )
    finally:
        server_noise.discrete_gaussian = sampler
    cells = sum(size for _, size in draws)

    opendp.enable_features("contrib")  # make_gaussian on integers is a contrib measurement
    space = opendp.vector_domain(opendp.atom_domain(T=int)), opendp.l2_distance(T=int)
    started = time.perf_counter()
    theirs = [
        np.asarray(opendp.m.make_gaussian(*space, scale=float(np.sqrt(v)))([0] * size))
        for v, size in draws
    ]
    opendp_seconds = time.perf_counter() - started
    rng = np.random.default_rng(1)
    ours = [sampler(v, size, rng) for v, size in draws]

    def spread(samples: list[np.ndarray]) -> float:
        """Mean over draws of sample variance / parameter."""
        return float(np.mean([s.var() / v for s, (v, _) in zip(samples, draws, strict=True)]))

    print(f"private FedPC (central, epsilon 8, delta 1e-6) on {args.network} x {args.rows:,} "
          f"over {args.clients} sites: run {result.wall_s:.2f} s, {len(draws)} draws, "
          f"{cells:,} cells")  # fmt: skip
    print(f"ours (float rejection sampler): {ours_seconds:.3f} s, "
          f"{ours_seconds / result.wall_s:.1%} of the run")  # fmt: skip
    print(f"OpenDP make_gaussian (exact):   {opendp_seconds:.3f} s, "
          f"{opendp_seconds / result.wall_s:.1%} of the run, "
          f"{opendp_seconds / max(ours_seconds, 1e-9):.0f}x ours")  # fmt: skip
    print(f"sample variance / parameter: ours {spread(ours):.4f}, OpenDP {spread(theirs):.4f}")


if __name__ == "__main__":
    main()
