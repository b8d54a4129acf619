"""counts.py: sums of the speculative round's counters over prompts (python3 stdlib only), shared by
the PyTorch reference (eval_mtp.py) and specdec's side of the agreement (bench/mtp_agreement.py),
so both reduce their per-prompt records the same way."""


def sum_counts(rows, K, keys, depth_keys):
    """Totals over rows (dicts) of the counters named in keys and of the per-depth lists named in
    depth_keys (depths 1 .. K-1)."""
    t = {k: 0 for k in keys}
    t.update({k: [0] * (K - 1) for k in depth_keys})
    for r in rows:
        for k in keys:
            t[k] += r[k]
        for k in depth_keys:
            for d in range(K - 1):
                t[k][d] += r[k][d]
    return t


def median_tau(rows):
    """The per-prompt tau (emitted / rounds) of the middle prompt (the upper one of an even count)."""
    taus = sorted(r["emitted"] / max(1, r["rounds"]) for r in rows)
    return taus[len(taus) // 2]
