//! The network's fastest rate, and from it the longest step the network takes in one piece.

use super::*;

/// The most the fastest motion of a network may turn in one step taken in one piece, rad
/// (`|lambda| h`, [`Simulation::max_step`]): 2 pi. The Gauss step samples its motion at two
/// stages, so at `|lambda| h = 2 pi` it samples the fastest oscillation twice a period, at the
/// Nyquist rate; a longer step would alias it (the A-stable step stays bounded, but an
/// oscillation it cannot sample is no longer the network's). A damped motion that decays at
/// this rate loses 95 % of itself per step (the Gauss step's damping factor at `z = -2 pi` is
/// 0.05), where it would barely decay at a hundred times the rate (0.89).
pub const MAX_STEP_TURN: f64 = 2.0 * std::f64::consts::PI;

/// The shortest a network's own bound on its step gets, s (1 ms, the step of a
/// driver-in-the-loop simulator): a network faster than [`MAX_STEP_TURN`] per millisecond
/// (6,283 /s: a millinewton metre spring on a microgram inertia) is taken in 1 ms pieces, its
/// fastest motion then unresolved but bounded (the Gauss step is A-stable), instead of in
/// the millions of pieces its rate would ask for. A 60 Hz frame is then 17 pieces at most,
/// and a step of a millisecond or less is never split by the network's bound.
pub const MIN_OWN_MAX_STEP: f64 = 1e-3;

impl Simulation {
    /// The longest step taken in one piece, s: a longer [`Simulation::step`] is split into
    /// equal sub-steps of at most this length. The shorter of
    /// [`IntegrationParameters::max_step`] (0.05 s by default) and the network's own bound:
    /// [`MAX_STEP_TURN`] divided by its fastest rate ([`Simulation::fastest_rate`]), but at
    /// least [`MIN_OWN_MAX_STEP`].
    pub fn max_step(&self) -> f64 {
        let own = (MAX_STEP_TURN / self.model.fastest_rate).max(MIN_OWN_MAX_STEP);
        let p = self.params.max_step;
        // (A max_step that is not a positive number, NaN included, is no bound.)
        if p > 0.0 && p < own { p } else { own }
    }

    /// A bound on the fastest rate of the network's linear motion, 1/s: every eigenvalue
    /// `lambda` of `lambda^2 M + lambda D + K` for the springs and dampers of the network
    /// (spring-dampers, elasto-backlash and dog clutches counted in contact, elastic clutches
    /// sticking) has `|lambda|` at most this, in every mode. It is computed once, when the
    /// simulation is built, in the mode with every friction element free: a lock adds a
    /// constraint, which can only lower the fastest frequency (Rayleigh), so that mode bounds
    /// the others. With `a` and `b` the largest eigenvalues of `Mr^-1 Dr` and `Mr^-1 Kr` over
    /// the free coordinates (the fastest decay of the dampers alone, the square of the fastest
    /// frequency of the springs alone), `|lambda|` is at most the positive root of
    /// `x^2 = a x + b`: an eigenvector `v` gives `lambda^2 + d lambda + k = 0` with the Rayleigh
    /// quotients `d <= a`, `k <= b`. Exact for springs alone. Zero for a network with no spring
    /// and no damper.
    ///
    /// The rates of nonlinear laws (a tyre's slip stiffness, which grows without bound near
    /// standstill, an engine's or a converter's torque slope) depend on the state and are not
    /// in it: a sub-step whose Newton iteration does not converge on them is cut instead (see
    /// the solver module's "When a sub-step goes wrong").
    pub fn fastest_rate(&self) -> f64 {
        self.model.fastest_rate
    }

    /// [`Simulation::fastest_rate`], computed from the base mode (slot 0, compiled).
    pub(super) fn linear_rate_bound(&self) -> f64 {
        let net = &self.model.net;
        let n = net.n_dof;
        let s = &self.slots[0];
        let m = s.m;
        if m == 0 {
            return 0.0;
        }
        // K and D in node space: each law's pair of nodes, stiffness and damping.
        let mut k = vec![0.0; n * n];
        let mut d = vec![0.0; n * n];
        let mut any = false;
        for law in &net.laws {
            let Some((a, b, c, dd)) = law.linear_pair() else { continue };
            for (mat, v) in [(&mut k, c), (&mut d, dd)] {
                if v == 0.0 {
                    continue;
                }
                any = true;
                for (i, j, sign) in [(a, a, 1.0), (b, b, 1.0), (a, b, -1.0), (b, a, -1.0)] {
                    if i < n && j < n {
                        mat[i * n + j] += sign * v;
                    }
                }
            }
        }
        if !any {
            return 0.0;
        }
        // The reduced matrix N^T X N of a node-space matrix X.
        let reduce = |x: &[f64]| -> Vec<f64> {
            let mut xn = vec![0.0; n * m];
            for i in 0..n {
                for b in 0..m {
                    xn[i * m + b] = (0..n).map(|j| x[i * n + j] * s.basis.nmat[j * n + b]).sum();
                }
            }
            let mut r = vec![0.0; m * m];
            for a in 0..m {
                for b in 0..m {
                    r[a * m + b] = (0..n).map(|i| s.basis.nmat[i * n + a] * xn[i * m + b]).sum();
                }
            }
            r
        };
        let (dr, kr) = (reduce(&d), reduce(&k));
        // The largest eigenvalue of Mr^-1 X: of the symmetric L^-1 X L^-T (Mr = L L^T), by
        // Jacobi rotations; the infinity norm of Mr^-1 X (a bound) if Mr is not positive
        // definite to rounding.
        let largest = |x: &[f64]| -> f64 {
            match cholesky(&s.mr[..m * m], m) {
                Some(l) => symmetric_largest(&mut congruence(&l, x, m), m),
                None => {
                    let mut rows = vec![0.0; m];
                    for b in 0..m {
                        let mut col: Vec<f64> = (0..m).map(|a| x[a * m + b]).collect();
                        linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut col);
                        for (r, c) in rows.iter_mut().zip(&col) {
                            *r += c.abs();
                        }
                    }
                    rows.iter().fold(0.0, |acc: f64, &r| acc.max(r))
                }
            }
        };
        let (a, b) = (largest(&dr).max(0.0), largest(&kr).max(0.0));
        let rate = 0.5 * (a + (a * a + 4.0 * b).sqrt());
        if rate.is_finite() { rate } else { f64::INFINITY }
    }
}

/// The Cholesky factor `L` (row-major, lower) of the symmetric `m x m` matrix `a`, or `None`
/// when it is not positive definite.
fn cholesky(a: &[f64], m: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..=i {
            let sum: f64 = a[i * m + j] - (0..j).map(|k| l[i * m + k] * l[j * m + k]).sum::<f64>();
            if i == j {
                // (Not positive, NaN included: not positive definite.)
                let positive = sum > 0.0;
                if !positive {
                    return None;
                }
                l[i * m + i] = sum.sqrt();
            } else {
                l[i * m + j] = sum / l[j * m + j];
            }
        }
    }
    Some(l)
}

/// `L^-1 X L^-T` for the lower-triangular `L` and the symmetric `X` (both `m x m`).
fn congruence(l: &[f64], x: &[f64], m: usize) -> Vec<f64> {
    // `L^-1 A^T`: each row of `A`, solved against `L`, is a column of the result.
    let solve_rows = |a: &[f64]| -> Vec<f64> {
        let mut out = vec![0.0; m * m];
        for c in 0..m {
            let mut b: Vec<f64> = a[c * m..(c + 1) * m].to_vec();
            for i in 0..m {
                let v = b[i] - (0..i).map(|k| l[i * m + k] * b[k]).sum::<f64>();
                b[i] = v / l[i * m + i];
            }
            for (r, v) in b.into_iter().enumerate() {
                out[r * m + c] = v;
            }
        }
        out
    };
    // Y = L^-1 X (X symmetric: X^T = X), then S = L^-1 Y^T = L^-1 X L^-T.
    let mut out = solve_rows(&solve_rows(x));
    // (Symmetric to rounding: made exactly so for the rotations.)
    for r in 0..m {
        for c in 0..r {
            let v = 0.5 * (out[r * m + c] + out[c * m + r]);
            out[r * m + c] = v;
            out[c * m + r] = v;
        }
    }
    out
}

/// The largest eigenvalue of the symmetric `m x m` matrix `a` (overwritten), by cyclic Jacobi
/// rotations until the off-diagonal part is below 1e-14 of the whole (at most 64 sweeps).
fn symmetric_largest(a: &mut [f64], m: usize) -> f64 {
    let norm2: f64 = a.iter().map(|v| v * v).sum();
    for _ in 0..64 {
        let off: f64 = (0..m)
            .flat_map(|p| (0..m).filter(move |&q| q != p).map(move |q| (p, q)))
            .map(|(p, q)| a[p * m + q] * a[p * m + q])
            .sum();
        if off <= 1e-28 * norm2 {
            break;
        }
        for p in 0..m {
            for q in p + 1..m {
                let apq = a[p * m + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * m + q] - a[p * m + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let sn = t * c;
                for k in 0..m {
                    let (akp, akq) = (a[k * m + p], a[k * m + q]);
                    a[k * m + p] = c * akp - sn * akq;
                    a[k * m + q] = sn * akp + c * akq;
                }
                for k in 0..m {
                    let (apk, aqk) = (a[p * m + k], a[q * m + k]);
                    a[p * m + k] = c * apk - sn * aqk;
                    a[q * m + k] = sn * apk + c * aqk;
                }
            }
        }
    }
    (0..m).map(|i| a[i * m + i]).fold(f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod tests {
    use super::{MAX_STEP_TURN, MIN_OWN_MAX_STEP};
    use crate::{Scenario, Simulation};

    /// A chain of three inertias `j` joined by springs of stiffness `c` (dampers `d` when `c`
    /// is zero; nothing when both are), the first one driven.
    fn chain(c: f64, d: f64, j: f64) -> Simulation {
        let link = match (c > 0.0, d > 0.0) {
            (true, _) => format!("Spring(c: {c:e})"),
            (false, true) => format!("Damper(d: {d:e})"),
            (false, false) => "IdealGear(ratio: 1.0)".to_string(),
        };
        let text = format!(
            r#"Scenario(name: "chain", t_end: 1.0, elements: [
                (name: "drive", kind: Torque(tau: Constant(10.0))),
                (name: "a", kind: Inertia(J: {j:e}, phi_start: 0.0, w_start: 0.0)),
                (name: "s1", kind: {link}),
                (name: "b", kind: Inertia(J: {j:e}, phi_start: 0.0, w_start: 0.0)),
                (name: "s2", kind: {link}),
                (name: "c", kind: Inertia(J: {j:e}, phi_start: 0.0, w_start: 0.0)),
            ], connections: [("drive.flange", "a.flange_a"), ("a.flange_b", "s1.flange_a"),
                ("s1.flange_b", "b.flange_a"), ("b.flange_b", "s2.flange_a"), ("s2.flange_b", "c.flange_a")])"#
        );
        let sc = Scenario::parse(&text, "chain").expect("parses");
        Simulation::new(sc.build(&text, "chain").expect("builds"))
    }

    /// The chain's undamped frequencies are `sqrt(c / J)` and `sqrt(3 c / J)`: the rate is the
    /// fastest, to rounding. With dampers `d` alone the decay rates are `d / J` and `3 d / J`:
    /// the rate is `3 d / J`.
    #[test]
    fn the_fastest_rate_is_the_chains_fastest_eigenvalue() {
        let (c, j) = (1e4, 1.0);
        let rate = chain(c, 0.0, j).fastest_rate();
        let fastest = (3.0 * c / j).sqrt();
        assert!((rate - fastest).abs() < 1e-12 * fastest, "{rate} against {fastest}");
        let damped = chain(0.0, 50.0, j).fastest_rate();
        assert!((damped - 150.0).abs() < 1e-12 * 150.0, "{damped}");
        // No spring, no damper (the inertias geared together): no bound of its own, the
        // parameters' 0.05 s holds.
        let free = chain(0.0, 0.0, j);
        assert_eq!((free.fastest_rate(), free.max_step()), (0.0, 0.05));
    }

    /// The longest piece: 2 pi over the rate (the chain's 173.2 /s: 36 ms), the parameters'
    /// 0.05 s when that is shorter, never under 1 ms; a longer step is taken in equal pieces,
    /// to the same motion as the pieces stepped one by one (to rounding of the piece ends).
    #[test]
    fn a_step_longer_than_the_networks_bound_is_taken_in_pieces() {
        let mut sim = chain(1e4, 0.0, 1.0);
        assert!((sim.max_step() - MAX_STEP_TURN / 3e4f64.sqrt()).abs() < 1e-15);
        assert_eq!(chain(10.0, 0.0, 1.0).max_step(), 0.05);
        assert_eq!(chain(1e4, 0.0, 1e-6).max_step(), MIN_OWN_MAX_STEP);
        let mut by_hand = sim.clone();
        sim.step(0.1).expect("a long step");
        let substeps = sim.stats().substeps;
        for _ in 0..3 {
            by_hand.step(0.1 / 3.0).expect("a piece");
        }
        assert_eq!(substeps, 3, "0.1 s in three pieces of 33 ms");
        for (a, b) in sim.speeds().iter().zip(by_hand.speeds()) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} against {b}");
        }
    }
}
