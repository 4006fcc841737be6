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
                    x[i] = clamp_or_nan(x[i], lo[i], hi[i]);
                }
            }
        } else {
            x[i] = clamp_or_nan(0.0, lo[i], hi[i]);
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

/// `x` clamped to `[lo, hi]`, or NaN for bounds that are not an interval (a NaN or an
/// inverted limit, from non-finite inputs): the step then reports a non-finite state instead of
/// panicking.
fn clamp_or_nan(x: f64, lo: f64, hi: f64) -> f64 {
    if lo <= hi { x.clamp(lo, hi) } else { f64::NAN }
}

#[cfg(test)]
mod tests {
    use super::box_qp;
    use approx::assert_relative_eq;
    use proptest::prelude::*;

    /// Solves `min 1/2 x^T W x + b^T x` on the box from a cold start (or warm from `start`).
    fn solve(
        k: usize,
        w: &[f64],
        b: &[f64],
        lo: &[f64],
        hi: &[f64],
        start: Option<(&[f64], &[i8])>,
    ) -> (Vec<f64>, Vec<i8>) {
        let (mut x, mut state) = match start {
            Some((x, s)) => (x.to_vec(), s.to_vec()),
            None => (vec![0.0; k], vec![0; k]),
        };
        let (mut fact, mut piv, mut tmp) = (vec![0.0; k * k], vec![0; k + 1], vec![0.0; k]);
        let mut factored = u64::MAX;
        box_qp(k, w, b, lo, hi, &mut x, &mut state, &mut fact, &mut piv, &mut factored, &mut tmp, start.is_some());
        (x, state)
    }

    /// The gradient `W x + b`.
    fn gradient(k: usize, w: &[f64], b: &[f64], x: &[f64]) -> Vec<f64> {
        (0..k).map(|i| (0..k).map(|j| w[i * k + j] * x[j]).sum::<f64>() + b[i]).collect()
    }

    #[test]
    fn an_interior_minimum_is_the_unconstrained_one() {
        // W = [[4, 1], [1, 3]], b = [-1, -2]: x = -W^-1 b = [1/11, 7/11].
        let w = [4.0, 1.0, 1.0, 3.0];
        let (x, state) = solve(2, &w, &[-1.0, -2.0], &[-10.0, -10.0], &[10.0, 10.0], None);
        // (Two eliminations on numbers of order one: a few ulps.)
        assert_relative_eq!(x[0], 1.0 / 11.0, max_relative = 1e-14);
        assert_relative_eq!(x[1], 7.0 / 11.0, max_relative = 1e-14);
        assert_eq!(state, [0, 0]);
    }

    #[test]
    fn a_bound_that_binds_holds_the_variable_and_the_other_follows() {
        // Unconstrained x = [1/11, 7/11]; with x1 <= 0.5 the bound binds and x0 minimises
        // 2 x0^2 + x0 x1 - x0 at x1 = 0.5: x0 = (1 - 0.5) / 4 = 0.125.
        let w = [4.0, 1.0, 1.0, 3.0];
        let (x, state) = solve(2, &w, &[-1.0, -2.0], &[-10.0, -10.0], &[10.0, 0.5], None);
        assert_eq!(x[1], 0.5);
        assert_relative_eq!(x[0], 0.125, max_relative = 1e-14);
        assert_eq!(state, [0, 1]);
    }

    #[test]
    fn equal_bounds_fix_the_variable() {
        let (x, state) = solve(1, &[2.0], &[-10.0], &[3.0], &[3.0], None);
        assert_eq!((x[0], state[0]), (3.0, -1));
    }

    /// A strictly convex problem on the box: W = A A^T + I (k x k), b and the bounds random.
    fn problem() -> impl Strategy<Value = (usize, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>)> {
        (1usize..=6).prop_flat_map(|k| {
            (
                Just(k),
                prop::collection::vec(-3.0f64..3.0, k * k),
                prop::collection::vec(-10.0f64..10.0, k),
                prop::collection::vec(-5.0f64..5.0, k),
                prop::collection::vec(0.0f64..5.0, k),
            )
                .prop_map(|(k, a, b, lo, width)| {
                    let mut w = vec![0.0; k * k];
                    for i in 0..k {
                        for j in 0..k {
                            w[i * k + j] = (0..k).map(|l| a[i * k + l] * a[j * k + l]).sum::<f64>();
                        }
                        w[i * k + i] += 1.0;
                    }
                    let hi = lo.iter().zip(&width).map(|(l, d)| l + d).collect();
                    (k, w, b, lo, hi)
                })
        })
    }

    proptest! {
        /// The solution satisfies the optimality (KKT) conditions of the box QP: inside the
        /// bounds, zero gradient where free, the gradient pointing out of the box where at a
        /// bound. A warm start from any state reaches the same (unique) minimiser.
        #[test]
        fn the_solution_is_optimal_and_unique((k, w, b, lo, hi) in problem(), seed in 0u64..1000) {
            let (x, state) = solve(k, &w, &b, &lo, &hi, None);
            let g = gradient(k, &w, &b, &x);
            // The tolerance: rounding in eliminations of a matrix with entries up to ~60,
            // relative to the gradient's scale.
            let scale = 1.0 + b.iter().fold(0.0f64, |s, v| s.max(v.abs())) + 60.0 * 5.0;
            let tol = 1e-10 * scale;
            for i in 0..k {
                prop_assert!(x[i] >= lo[i] && x[i] <= hi[i], "x[{i}] = {} outside [{}, {}]", x[i], lo[i], hi[i]);
                match state[i] {
                    0 => prop_assert!(g[i].abs() <= tol, "free x[{i}]: gradient {}", g[i]),
                    -1 => prop_assert!(g[i] >= -tol, "x[{i}] at lo: gradient {}", g[i]),
                    _ => prop_assert!(g[i] <= tol, "x[{i}] at hi: gradient {}", g[i]),
                }
            }
            // A warm start from a scrambled state.
            let start_state: Vec<i8> = (0..k).map(|i| ((seed >> (2 * i)) % 3) as i8 - 1).collect();
            let start_x: Vec<f64> = (0..k).map(|i| lo[i] + (hi[i] - lo[i]) * ((seed >> i) % 7) as f64 / 6.0).collect();
            let (xw, _) = solve(k, &w, &b, &lo, &hi, Some((&start_x, &start_state)));
            for i in 0..k {
                // (Strict convexity: one minimiser; the two paths round differently.)
                prop_assert!((xw[i] - x[i]).abs() <= 1e-9 * (1.0 + x[i].abs()), "warm {} cold {}", xw[i], x[i]);
            }
        }
    }
}
