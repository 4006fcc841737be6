//! The boxed convex QP solved at every mode selection, as a pure function.

use super::*;

/// Convex box-constrained QP `min 1/2 x^T W x + b^T x, lo <= x <= hi` by a primal active-set
/// method (exact, finite). `W` must be symmetric positive definite (the caller regularises).
/// `state[i]`: 0 free, -1 at lo, +1 at hi. `fact`/`piv` hold the LU factors of the free
/// block with free mask `factored` (`u64::MAX`: none); they are reused while the free set is
/// that one, and left holding the last factorisation.
#[allow(clippy::too_many_arguments)]
pub(super) fn box_qp(
    k: usize,
    w: &[f64],
    b: &[f64],
    lo: &[f64],
    hi: &[f64],
    x: &mut [f64],
    state: &mut [i8],
    fact: &mut [f64],
    piv: &mut [usize],
    factored: &mut u64,
    tmp: &mut [f64],
    warm: bool,
) {
    for i in 0..k {
        if warm {
            // Start from the given point and active set, made feasible.
            match state[i] {
                1 if hi[i].is_finite() => x[i] = hi[i],
                -1 if lo[i].is_finite() => x[i] = lo[i],
                _ => {
                    state[i] = 0;
                    x[i] = x[i].clamp(lo[i], hi[i]);
                }
            }
        } else {
            x[i] = 0.0f64.clamp(lo[i], hi[i]);
            state[i] = 0;
        }
        if lo[i] == hi[i] {
            x[i] = lo[i];
            state[i] = -1;
        }
    }
    for _ in 0..(8 * k + 16) {
        // Solve the free subproblem: W_FF y_F = -(b_F + W_FB x_B).
        let mut nfree = 0;
        let mut idx = [0usize; 64];
        let mut free_mask = 0u64;
        for i in 0..k {
            if state[i] == 0 {
                idx[nfree] = i;
                nfree += 1;
                free_mask |= 1 << i;
            }
        }
        for a in 0..nfree {
            let ia = idx[a];
            let mut r = -b[ia];
            for j in 0..k {
                if state[j] != 0 {
                    r -= w[ia * k + j] * x[j];
                }
            }
            tmp[a] = r;
        }
        if nfree > 0 && *factored != free_mask {
            for a in 0..nfree {
                for c in 0..nfree {
                    fact[a * nfree + c] = w[idx[a] * k + idx[c]];
                }
            }
            *factored = if linalg::lu_factor(fact, nfree, piv).is_ok() { free_mask } else { u64::MAX };
        }
        if nfree > 0 && *factored == free_mask {
            linalg::lu_solve(fact, nfree, piv, tmp);
        }
        // Step towards the subspace minimiser, stopping at the first bound.
        let mut alpha = 1.0;
        let mut block = usize::MAX;
        for a in 0..nfree {
            let i = idx[a];
            let target = tmp[a];
            let d = target - x[i];
            if target > hi[i] && d > 0.0 {
                let al = (hi[i] - x[i]) / d;
                if al < alpha {
                    alpha = al;
                    block = i;
                }
            } else if target < lo[i] && d < 0.0 {
                let al = (lo[i] - x[i]) / d;
                if al < alpha {
                    alpha = al;
                    block = i;
                }
            }
        }
        for a in 0..nfree {
            let i = idx[a];
            x[i] += alpha * (tmp[a] - x[i]);
        }
        if block != usize::MAX {
            let i = block;
            if (x[i] - hi[i]).abs() <= (x[i] - lo[i]).abs() {
                x[i] = hi[i];
                state[i] = 1;
            } else {
                x[i] = lo[i];
                state[i] = -1;
            }
            continue;
        }
        // Optimal on this face: check the multipliers of the bound variables.
        let mut worst = 0.0;
        let mut wi = usize::MAX;
        for i in 0..k {
            if state[i] == 0 || lo[i] == hi[i] {
                continue;
            }
            let g: f64 = (0..k).map(|j| w[i * k + j] * x[j]).sum::<f64>() + b[i];
            // At lo the gradient must be >= 0, at hi <= 0.
            let viol = if state[i] < 0 { -g } else { g };
            if viol > worst {
                worst = viol;
                wi = i;
            }
        }
        if wi == usize::MAX || worst <= 1e-14 * (1.0 + b.iter().take(k).fold(0.0f64, |s, v| s.max(v.abs()))) {
            return;
        }
        state[wi] = 0;
    }
}
