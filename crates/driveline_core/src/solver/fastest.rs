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
    /// the others. With `a = ||Mr^-1 Dr||` and `b = ||Mr^-1 Kr||` (infinity norms, over the
    /// free coordinates), `|lambda|` is at most the positive root of `x^2 = a x + b` (the Cauchy
    /// bound of a matrix polynomial). Zero for a network with no spring and no damper.
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
        // ||Mr^-1 (N^T X N)||_inf, column by column.
        let norm = |x: &[f64]| -> f64 {
            let mut rows = vec![0.0; m];
            let mut col = vec![0.0; m];
            let mut xn = vec![0.0; n];
            for bcol in 0..m {
                // X N e_b, then N^T of it.
                for i in 0..n {
                    xn[i] = (0..n).map(|j| x[i * n + j] * s.basis.nmat[j * n + bcol]).sum();
                }
                for (a, c) in col.iter_mut().enumerate() {
                    *c = (0..n).map(|i| s.basis.nmat[i * n + a] * xn[i]).sum();
                }
                if col.iter().any(|&v| v != 0.0) {
                    linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut col);
                    for (r, c) in rows.iter_mut().zip(&col) {
                        *r += c.abs();
                    }
                }
            }
            rows.iter().fold(0.0, |acc: f64, &r| acc.max(r))
        };
        let (a, b) = (norm(&d), norm(&k));
        let rate = 0.5 * (a + (a * a + 4.0 * b).sqrt());
        if rate.is_finite() { rate } else { f64::INFINITY }
    }
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

    /// The chain's undamped frequencies are `sqrt(c / J)` and `sqrt(3 c / J)`: the bound is at
    /// least the fastest (it is a bound), and here the infinity norm's row sum `4 c / J` gives
    /// `2 sqrt(c / J)`, within 16 % of it. With dampers `d` alone the fastest decay rate is
    /// `3 d / J`, the bound `4 d / J`.
    #[test]
    fn the_fastest_rate_bounds_the_chains_eigenvalues() {
        let (c, j) = (1e4, 1.0);
        let sim = chain(c, 0.0, j);
        let fastest = (3.0 * c / j).sqrt();
        let rate = sim.fastest_rate();
        assert!(rate >= fastest && rate <= 1.16 * fastest, "{rate} against {fastest}");
        assert_eq!(rate, 2.0 * (c / j).sqrt());
        let damped = chain(0.0, 50.0, j).fastest_rate();
        assert!(damped >= 150.0 && (damped - 200.0).abs() < 1e-9, "{damped}");
        // No spring, no damper (the inertias geared together): no bound of its own, the
        // parameters' 0.05 s holds.
        let free = chain(0.0, 0.0, j);
        assert_eq!((free.fastest_rate(), free.max_step()), (0.0, 0.05));
    }

    /// The longest piece: 2 pi over the rate (the chain's 200 /s: 31 ms), the parameters' 0.05 s
    /// when that is shorter, never under 1 ms; a longer step is taken in equal pieces, to the
    /// same motion as the pieces stepped one by one (to rounding of the piece ends).
    #[test]
    fn a_step_longer_than_the_networks_bound_is_taken_in_pieces() {
        let mut sim = chain(1e4, 0.0, 1.0);
        assert!((sim.max_step() - MAX_STEP_TURN / 200.0).abs() < 1e-15);
        assert_eq!(chain(10.0, 0.0, 1.0).max_step(), 0.05);
        assert_eq!(chain(1e4, 0.0, 1e-6).max_step(), MIN_OWN_MAX_STEP);
        let mut by_hand = sim.clone();
        sim.step(0.1).expect("a long step");
        let substeps = sim.stats().substeps;
        for _ in 0..4 {
            by_hand.step(0.025).expect("a piece");
        }
        assert_eq!(substeps, 4, "0.1 s in four pieces of 25 ms");
        for (a, b) in sim.speeds().iter().zip(by_hand.speeds()) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} against {b}");
        }
    }
}
