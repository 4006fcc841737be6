//! Element laws: each element's constitutive equation lives here, in one place.
//!
//! The solver sees three things only: generalised forces on node coordinates (this module's
//! [`Law::eval`]), rigid constraint rows ([`Row`]), and friction rows with torque limits
//! ([`FrictionLaw`]). Node indices below `n_dof` are free coordinates; the rest are grounds.

use crate::Table1D;
use crate::converter::ConverterMap;
use crate::torque_map::TorqueMap;
use crate::tyre::MagicFormula;

mod feedback;
mod friction;
mod law;
mod speed_curve;

pub use feedback::Expr;
pub use friction::*;
pub use law::*;
pub use speed_curve::SpeedCurve;

/// A sparse rigid constraint row `sum coef_k * w[node_k] = 0` (also holds for angles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// `(node, coefficient)` pairs, the non-zero ones first; unused entries are `(0, 0.0)`
    /// at the end ([`Row::new`] orders them so: [`Row::dot`] stops at the first zero).
    pub entries: [(usize, f64); 3],
}

impl Row {
    /// Row from up to three entries; entries on the same node are merged.
    pub fn new(items: &[(usize, f64)]) -> Self {
        let mut entries = [(0usize, 0.0f64); 3];
        let mut k = 0;
        for &(n, c) in items {
            if let Some(e) = entries[..k].iter_mut().find(|e| e.0 == n) {
                e.1 += c;
            } else {
                entries[k] = (n, c);
                k += 1;
            }
        }
        // Entries that merged to zero go to the end.
        let mut out = [(0usize, 0.0f64); 3];
        for (slot, e) in out.iter_mut().zip(entries.iter().filter(|e| e.1 != 0.0)) {
            *slot = *e;
        }
        Self { entries: out }
    }

    /// `sum coef * x[node]` over the non-zero coefficients, summed in order from -0.0 (an
    /// unused entry adds +0.0, as a zero term would).
    #[inline]
    pub fn dot(&self, x: &[f64]) -> f64 {
        let mut s = -0.0;
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return s + 0.0;
            }
            s += c * x[n];
        }
        s
    }

    /// The sum of the squared coefficients.
    pub fn norm2(&self) -> f64 {
        self.entries.iter().map(|e| e.1 * e.1).sum()
    }

    /// [`Row::dot`] of three vectors at once, each summed as `dot` sums it.
    #[inline]
    pub fn dot3(&self, x: [&[f64]; 3]) -> [f64; 3] {
        self.dot_n(x)
    }

    /// [`Row::dot`] of `N` vectors at once, each summed as `dot` sums it.
    #[inline]
    pub fn dot_n<const N: usize>(&self, x: [&[f64]; N]) -> [f64; N] {
        let mut s = [-0.0; N];
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return s.map(|s| s + 0.0);
            }
            for (s, x) in s.iter_mut().zip(x) {
                *s += c * x[n];
            }
        }
        s
    }

    /// Adds `scale * row^T` to the force vector `f`.
    #[inline]
    pub fn add_scaled(&self, f: &mut [f64], scale: f64) {
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return;
            }
            f[n] += c * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(law: &Law, phi: [f64; 3], w: [f64; 3], sig: &[f64]) -> ([f64; 3], LawOutput) {
        let mut f = [0.0; 3];
        let out = law.eval(&phi, &w, sig, LawState::default(), &mut f, None);
        (f, out)
    }

    /// The stage predictor's claims: a clutch's and a tyre's kinetic torque is proportional
    /// to its signal (so scaling by the ratio of two values is exact, at any slip), and a
    /// law's `signal_step` is the difference of its forces at the two values.
    #[test]
    fn input_step_responses_are_exact() {
        let mu = crate::Table1D::new(vec![(0.0, 0.5), (10.0, 0.3)]).unwrap();
        let clutch = FrictionLaw::Normal { mu, peak: 1.1, cgeo: 0.1, fn_max: 2000.0, signal: 0 };
        let tyre = FrictionLaw::Tyre {
            mf: crate::MagicFormula::default(),
            kappa_peak: crate::MagicFormula::default().peak_slip(),
            v_low: 1.0,
            load: 0,
            ground: 1,
        };
        for law in [&clutch, &tyre] {
            assert_eq!(law.torque_signal(), Some(0));
            for slip in [0.0, 0.7, 3.0, 25.0] {
                let (a, b) = (0.37, 0.81);
                let w = [0.0, 12.0];
                let ta = law.kinetic(&[a], slip, &w).0;
                let tb = law.kinetic(&[b], slip, &w).0;
                // Proportional to rounding (a few ulps of the torque).
                assert!((ta * (b / a) - tb).abs() <= 1e-14 * tb.abs(), "{law:?} at {slip}: {ta} {tb}");
            }
        }
        let map = crate::TorqueMap::full_and_closed(
            &[1000.0, 3000.0, 6000.0],
            &[150.0, 200.0, 170.0],
            &[-10.0, -30.0, -60.0],
        )
        .unwrap();
        let engine = Law::Engine { flange: 0, support: 2, map, throttle: 0 };
        let w = [300.0, 0.0, 0.0];
        let (f0, _) = eval(&engine, [0.0; 3], w, &[0.2]);
        let (f1, _) = eval(&engine, [0.0; 3], w, &[0.9]);
        let (a, b, d) = engine.signal_step(0, 0.2, 0.9, &w).unwrap();
        assert_eq!((a, b), (0, 2));
        assert!((d - (f1[0] - f0[0])).abs() <= 1e-12 * f1[0].abs(), "{d} against {}", f1[0] - f0[0]);
        assert_eq!(engine.signal_step(1, 0.2, 0.9, &w), None, "not its input");
        let source = Law::Source { flange: 1, support: 2, signal: 3 };
        assert_eq!(source.signal_step(3, 5.0, 7.5, &w), Some((1, 2, 2.5)));
        assert_eq!(source.input_signal(), Some(3));
    }

    #[test]
    fn positive_source_torque_accelerates_the_flange_forwards() {
        let (f, out) = eval(&Law::Source { flange: 0, support: 2, signal: 0 }, [0.0; 3], [1.0, 0.0, 0.0], &[5.0]);
        assert_eq!(f, [5.0, 0.0, -5.0]);
        assert_eq!(out.power, 5.0);
    }

    #[test]
    fn stretched_spring_pulls_a_forward_and_b_back() {
        // phi_rel = phi_b - phi_a = 0.1 > 0: tau = 10 > 0, a receives +tau, b receives -tau.
        let law = Law::SpringDamper { a: 0, b: 1, c: 100.0, d: 0.0, phi_rel0: 0.0 };
        let (f, out) = eval(&law, [0.0, 0.1, 0.0], [0.0; 3], &[]);
        assert!((f[0] - 10.0).abs() < 1e-12 && (f[1] + 10.0).abs() < 1e-12);
        assert!((law.potential(&[0.0, 0.1, 0.0], LawState::default(), &[]) - 0.5).abs() < 1e-12);
        assert_eq!(out.tau, 10.0);
    }

    #[test]
    fn damper_dissipates() {
        let law = Law::SpringDamper { a: 0, b: 1, c: 0.0, d: 2.0, phi_rel0: 0.0 };
        let (_, out) = eval(&law, [0.0; 3], [1.0, -1.0, 0.0], &[]);
        assert!(out.power < 0.0);
        assert_eq!(out.power, -8.0);
    }

    #[test]
    fn quadratic_load_brakes_forward_motion() {
        let law = Law::Quadratic { flange: 0, support: 2, nominal: -20.0, w_nominal: 10.0, same_direction: true };
        let (f, _) = eval(&law, [0.0; 3], [10.0, 0.0, 0.0], &[]);
        assert_eq!(f[0], -20.0);
    }

    #[test]
    fn backlash_contact_only_pushes() {
        // Separating fast: spring part 20e3 * 0.01 = 200, damping part 50 * -10 = -500 -> released.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, -10.0, true), Regime::Released);
        // Approaching: spring part 200, damping part 50 -> tau = tc + td.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, 1.0, true), Regime::Damped);
        // Fast approach: damping part 5000 > spring part 200 -> capped at 2 tc.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, 100.0, true), Regime::Capped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, -0.11, -100.0, true), Regime::Capped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, -0.11, 10.0, true), Regime::Released);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.05, 1.0, true), Regime::Open);
        // ElastoBacklash2: the damping part is never capped.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, 100.0, false), Regime::Damped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, -0.11, -100.0, false), Regime::Damped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, -10.0, false), Regime::Released);
    }
}
