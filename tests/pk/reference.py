"""An independent, brute-force simulator of event schedules for linear models (tests).

Event by event, in time order, with exact propagation between events by the matrix
exponential of the augmented matrix [[K, r], [0, 0]] (r the current infusion rates);
steady states by simulating a long series of explicit doses. Written from NONMEM's
rules, without the library's superposition, steady-state formulas or closed forms.
"""

import heapq

import numpy as np
import scipy.linalg as sla


def _propagate(K, x, r, dt):
    n = len(x)
    if dt <= 0:
        return x
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = K * dt
    A[:n, n] = r * dt
    E = sla.expm(A)
    return E[:n, :n] @ x + E[:n, n]


def _series(K, c, amt, rate, dur, ii, lag, t_end, n_doses):
    """State at t_end after doses at t_end + lag - m ii, m = n_doses..1, from zero;
    returns the state and the infusions still running [(end time, rate, cmt)]."""
    n = len(K)
    t = t_end + lag - n_doses * ii
    x = np.zeros(n)
    events = []
    for m in range(n_doses, 0, -1):
        tau = t_end + lag - m * ii
        if rate > 0:
            events.append((tau, +rate))
            events.append((tau + dur, -rate))
        else:
            events.append((tau, None))
    events.sort(key=lambda e: e[0])
    r = np.zeros(n)
    running = []
    for tau, what in events:
        if tau > t_end:
            break
        x = _propagate(K, x, r, tau - t)
        t = tau
        if what is None:
            x[c] += amt
        else:
            r[c] += what
    x = _propagate(K, x, r, t_end - t)
    for m in range(n_doses, 0, -1):
        tau = t_end + lag - m * ii
        if rate > 0 and tau <= t_end < tau + dur:
            running.append((tau + dur, rate, c))
    return x, running


def simulate(K, time, evid, amt, cmt, rate, ii, addl, ss, F=None, tlag=None,
             n_ss=400):
    """Amounts after each record (one subject), shape (n_records, n)."""
    K = np.asarray(K, float)
    n = len(K)
    F = np.ones(n) if F is None else np.broadcast_to(np.asarray(F, float), (n,))
    L = np.zeros(n) if tlag is None else np.broadcast_to(np.asarray(tlag, float), (n,))
    N = len(time)
    # derived events: (time, key, source record, kind, cmt, value)
    derived = []
    for j in range(N):
        if evid[j] not in (1, 4):
            continue
        c = cmt[j] - 1
        a = F[c] * amt[j]
        if ss[j] and rate[j] > 0 and amt[j] == 0:
            continue                    # constant infusion: handled at the record
        for k in range(addl[j] + 1):
            tau = time[j] + k * ii[j] + L[c]
            if rate[j] > 0:
                derived.append((tau, j - 0.5, j, "start", c, rate[j]))
                derived.append((tau + a / rate[j], j - 0.5, j, "stop", c, rate[j]))
            else:
                derived.append((tau, j - 0.5, j, "bolus", c, a))
    # per record: its reset, its steady state, its own doses (key j - 0.5), its output;
    # derived events of earlier records at the same time come before all of these
    records = [(time[i], i, i, "record", None, None) for i in range(N)]
    for i in range(N):
        if evid[i] in (3, 4) or (evid[i] in (1, 4) and ss[i] == 1):
            records.append((time[i], i - 0.75, i, "reset", None, None))
        if evid[i] in (1, 4) and ss[i]:
            records.append((time[i], i - 0.7, i, "ss", None, None))
    heap = [(e[0], e[1], seq) + e[2:] for seq, e in enumerate(derived + records)]
    heapq.heapify(heap)
    seq = len(heap)
    x = np.zeros(n)
    t = time[0]
    active = []                         # [source, cmt, rate, end]
    epoch = 0
    out = np.zeros((N, n))
    while heap:
        tau, key, _, src, kind, c, val = heapq.heappop(heap)
        r = np.zeros(n)
        for s_, c_, rt, end in active:
            r[c_] += rt
        x = _propagate(K, x, r, tau - t)
        t = tau
        if kind not in ("record", "reset", "ss"):
            if src < epoch:
                continue                # cancelled by a reset
            if kind == "bolus":
                x[c] += val
            elif kind == "start":
                active.append([src, c, val, None])
            else:
                for e in active:
                    if e[0] == src and e[1] == c and e[2] == val and e[3] is None:
                        active.remove(e)
                        break
            continue
        i = src
        if kind == "reset":
            x = np.zeros(n)
            active = [e for e in active if e[0] >= i]
            epoch = i
            continue
        if kind == "ss":
            c = cmt[i] - 1
            if rate[i] > 0 and amt[i] == 0:
                xs = np.linalg.solve(-K, np.eye(n)[c] * rate[i])
                active.append([i, c, rate[i], None])
            else:
                a = F[c] * amt[i]
                dur = a / rate[i] if rate[i] > 0 else 0.0
                xs, running = _series(K, c, a, rate[i], dur, ii[i], L[c], time[i], n_ss)
                for end, rt, cc in running:
                    # a running infusion of the series: stops at ``end``
                    active.append([i, cc, rt, None])
                    heapq.heappush(heap, (end, i - 0.5, seq, i, "stop", cc, rt))
                    seq += 1
            x = x + xs
            continue
        out[i] = x
    return out

