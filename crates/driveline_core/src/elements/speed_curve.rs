//! Torques that are functions of a speed alone: the MSL sources `LinearSpeedDependentTorque`,
//! `InverseSpeedDependentTorque` and `SignTorque` (the quadratic one is [`super::Law::Quadratic`]).

use crate::model::Regularization;

/// A torque `tau(w)` of the speed `w` of a flange relative to its support, N m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpeedCurve {
    /// `nominal |w| / w_nominal` (`same_direction`) or `nominal w / w_nominal`.
    Linear {
        /// Torque at the nominal speed, N m.
        nominal: f64,
        /// Nominal speed, rad/s.
        w_nominal: f64,
        /// True: the same direction for both signs of `w`.
        same_direction: bool,
    },
    /// `power / |w|` (`same_direction`) or `power / w` above `w0`; below it `power / w0`, or
    /// `power w / w0^2`.
    Inverse {
        /// `tau_nominal w_nominal`, W.
        power: f64,
        /// Regularisation speed, rad/s.
        w0: f64,
        /// True: the same direction for both signs of `w`.
        same_direction: bool,
    },
    /// `tau s(w / w0)`, `s` the regularised sign of [`Regularization`].
    Sign {
        /// Torque magnitude, N m.
        tau: f64,
        /// Regularisation speed, rad/s.
        w0: f64,
        /// Shape.
        reg: Regularization,
    },
}

impl SpeedCurve {
    /// The torque at relative speed `w` and its derivative `d tau / d w`.
    pub fn eval(&self, w: f64) -> (f64, f64) {
        match *self {
            SpeedCurve::Linear { nominal, w_nominal, same_direction } => {
                let k = nominal / w_nominal;
                if same_direction {
                    // (The slope at w = 0 is taken from the positive side.)
                    (k * w.abs(), if w < 0.0 { -k } else { k })
                } else {
                    (k * w, k)
                }
            }
            SpeedCurve::Inverse { power, w0, same_direction } => {
                let a = w.abs();
                match (same_direction, a > w0) {
                    (true, true) => (power / a, -power * w.signum() / (a * a)),
                    (true, false) => (power / w0, 0.0),
                    (false, true) => (power / w, -power / (w * w)),
                    (false, false) => (power * w / (w0 * w0), power / (w0 * w0)),
                }
            }
            SpeedCurve::Sign { tau, w0, reg } => {
                let x = w / w0;
                let (s, ds) = match reg {
                    Regularization::Exp => {
                        // 2 / (1 + e^(-100 x)) - 1 = tanh(50 x).
                        let t = (50.0 * x).tanh();
                        (t, 50.0 * (1.0 - t * t))
                    }
                    _ if x.abs() >= 1.0 => (x.signum(), 0.0),
                    Regularization::Sine => {
                        let q = std::f64::consts::FRAC_PI_2;
                        ((q * x).sin(), q * (q * x).cos())
                    }
                    Regularization::Linear => (x, 1.0),
                    Regularization::CoSine => {
                        let q = std::f64::consts::FRAC_PI_2;
                        (x.signum() * (1.0 - (q * x).cos()), q * (q * x.abs()).sin())
                    }
                };
                (tau * s, tau * ds / w0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every curve's derivative is its slope (central differences, step 1e-6 rad/s: the
    /// truncation error is below 1e-6 of the slope for these smooth pieces).
    #[test]
    fn derivatives_match_the_slopes() {
        let curves = [
            SpeedCurve::Linear { nominal: -20.0, w_nominal: 10.0, same_direction: true },
            SpeedCurve::Linear { nominal: -20.0, w_nominal: 10.0, same_direction: false },
            SpeedCurve::Inverse { power: 300.0, w0: 2.0, same_direction: true },
            SpeedCurve::Inverse { power: 300.0, w0: 2.0, same_direction: false },
            SpeedCurve::Sign { tau: 5.0, w0: 3.0, reg: Regularization::Exp },
            SpeedCurve::Sign { tau: 5.0, w0: 3.0, reg: Regularization::Sine },
            SpeedCurve::Sign { tau: 5.0, w0: 3.0, reg: Regularization::Linear },
            SpeedCurve::Sign { tau: 5.0, w0: 3.0, reg: Regularization::CoSine },
        ];
        for c in curves {
            for w in [-7.3, -2.5, -0.01, 0.013, 1.1, 2.9, 4.0, 12.0] {
                let e = 1e-6;
                let slope = (c.eval(w + e).0 - c.eval(w - e).0) / (2.0 * e);
                let d = c.eval(w).1;
                assert!((slope - d).abs() <= 1e-6 * d.abs().max(1.0), "{c:?} at {w}: {d} vs {slope}");
            }
        }
    }

    /// The regularised pieces meet the outer law at `w0` (continuity), and Exp is `2/(1 +
    /// exp(-100 x)) - 1` as MSL writes it.
    #[test]
    fn the_pieces_meet() {
        let inv = SpeedCurve::Inverse { power: 300.0, w0: 2.0, same_direction: false };
        assert!((inv.eval(2.0).0 - 150.0).abs() < 1e-12 && (inv.eval(-2.0).0 + 150.0).abs() < 1e-12);
        for reg in [Regularization::Sine, Regularization::Linear, Regularization::CoSine] {
            let s = SpeedCurve::Sign { tau: 1.0, w0: 3.0, reg };
            assert!((s.eval(3.0 - 1e-12).0 - 1.0).abs() < 1e-9 && (s.eval(-3.0 + 1e-12).0 + 1.0).abs() < 1e-9);
        }
        let exp = SpeedCurve::Sign { tau: 1.0, w0: 3.0, reg: Regularization::Exp };
        for x in [-0.02f64, 0.001, 0.03] {
            let msl = 2.0 / (1.0 + (-100.0 * x).exp()) - 1.0;
            assert!((exp.eval(3.0 * x).0 - msl).abs() < 1e-15, "{x}");
        }
    }
}
