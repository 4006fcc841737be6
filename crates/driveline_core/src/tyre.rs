//! The longitudinal tyre: a simplified Pacejka Magic Formula with Coulomb-style sticking.
//!
//! # The law
//! The tyre is a friction element between the wheel (angle `phi`, radius `R`) and the ground
//! under it (the vehicle body, or a ground speed written by a game). Its relative "speed" is the
//! slip velocity `v_s = R w - v` (m/s) and its "torque" is the longitudinal force `F_x` (N) on
//! the ground; the wheel receives `-R F_x`.
//!
//! The Magic Formula (Pacejka, *Tyre and Vehicle Dynamics*, 2006, eq. 4.49 without shifts):
//!
//! ```text
//! F(kappa) = F_z D sin(C atan(B kappa - E (B kappa - atan(B kappa))))
//! ```
//!
//! with `D` the peak friction coefficient, rising from 0 at `kappa = 0` to its peak `D F_z` at
//! `kappa_p` and falling towards `D sin(pi C / 2) F_z` at large slip.
//!
//! **Simplification (documented, deliberate)**: the rising branch `0 < kappa < kappa_p` (a few per
//! cent of slip in which the tread deforms) is treated as rolling without slip, exactly like the
//! stuck state of an MSL clutch: while the force the driveline asks for stays within the peak
//! `D F_z`, the wheel rolls (`R w = v` to rounding) and the force is whatever the coupled solve
//! requires. Beyond the peak the tyre breaks away and slides along the falling branch, with
//!
//! ```text
//! kappa = kappa_p + |v_s| / max(|v|, v_low),   F_x = sign(v_s) F(kappa)
//! ```
//!
//! so the force is continuous at break-away and the slide re-sticks when the slip velocity
//! returns to zero. This keeps the hill-hold exact (a braked car on a grade does not creep, the
//! complaint anchors.md records against tyre models that are viscous at standstill) and needs no
//! stiff low-speed regularisation. `v_low` (default 1 m/s) bounds the slip ratio's denominator
//! at standstill (the usual low-speed fix of slip-ratio tyre models).

use serde::{Deserialize, Serialize};

/// Magic Formula coefficients, dimensionless. Defaults: a dry road car tyre,
/// `B = 12, C = 1.5, D = 1.0, E = 0`: the peak at 14.4 % slip and a locked-wheel friction of
/// `D sin(pi C / 2) = 0.71` of the peak (a project choice within the usual ranges; the much
/// quoted `C = 1.9, E = 0.97` set slides at only 16 % of its peak).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MagicFormula {
    /// Stiffness factor `B` (> 0).
    pub b: f64,
    /// Shape factor `C`, in (1, 2): above 1 the curve has a peak.
    pub c: f64,
    /// Peak friction coefficient `D` (> 0): 1.0 dry asphalt, 0.5 wet, 0.1 ice.
    pub d: f64,
    /// Curvature factor `E` (<= 1).
    pub e: f64,
}

impl Default for MagicFormula {
    fn default() -> Self {
        Self { b: 12.0, c: 1.5, d: 1.0, e: 0.0 }
    }
}

impl MagicFormula {
    /// Checks the coefficients; the message says what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |v: f64| v.is_finite();
        if !(ok(self.b) && self.b > 0.0 && self.b <= 100.0) {
            return Err(format!("`b` is {}; the stiffness factor must be in (0, 100] (the plausible range)", self.b));
        }
        if !(ok(self.c) && self.c > 1.0 && self.c < 2.0) {
            return Err(format!("`c` is {}; the shape factor must lie in (1, 2) so the curve has a peak", self.c));
        }
        if !(ok(self.d) && self.d > 0.0 && self.d <= 10.0) {
            return Err(format!(
                "`d` is {}; the peak friction coefficient must be in (0, 10] (the plausible range)",
                self.d
            ));
        }
        if !(ok(self.e) && self.e <= 1.0 && self.e >= -100.0) {
            return Err(format!("`e` is {}; the curvature factor must be in [-100, 1] (the plausible range)", self.e));
        }
        Ok(())
    }

    /// Normalised force `F / F_z` and its slope `d(F/F_z)/d kappa` at slip ratio `kappa >= 0`.
    #[inline]
    pub fn eval(&self, kappa: f64) -> (f64, f64) {
        self.eval_in::<true>(kappa)
    }

    /// The normalised force of [`MagicFormula::eval`] alone: the same value, bit for bit,
    /// without the slope's cosine and division.
    #[inline]
    pub fn value(&self, kappa: f64) -> f64 {
        self.eval_in::<false>(kappa).0
    }

    /// [`MagicFormula::eval`] with the slope formed (`SLOPE`) or left at zero.
    #[inline(always)]
    pub(crate) fn eval_in<const SLOPE: bool>(&self, kappa: f64) -> (f64, f64) {
        let bk = self.b * kappa;
        // E = 0 (the default) makes x = B kappa exactly: skip the inner arctangent.
        let x = if self.e == 0.0 { bk } else { bk - self.e * (bk - bk.atan()) };
        let (sin, cos) = sin_cos_c_atan::<SLOPE>(self.c, x);
        if !SLOPE {
            return (self.d * sin, 0.0);
        }
        let dx = if self.e == 0.0 { self.b } else { self.b - self.e * (self.b - self.b / (1.0 + bk * bk)) };
        (self.d * sin, self.d * cos * self.c * dx / (1.0 + x * x))
    }

    /// Slip ratio of the peak, where `C atan(x) = pi/2`: solves `B k - E (B k - atan(B k)) =
    /// tan(pi / 2C)` by bisection (the left side increases in `k` for `E <= 1`).
    pub fn peak_slip(&self) -> f64 {
        let target = (std::f64::consts::FRAC_PI_2 / self.c).tan();
        let g = |k: f64| {
            let bk = self.b * k;
            bk - self.e * (bk - bk.atan()) - target
        };
        let (mut lo, mut hi) = (0.0, 1.0);
        while g(hi) < 0.0 && hi < 1e6 {
            hi *= 2.0;
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if g(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }
}

/// The slip ratio on the rising branch (`0 <= kappa <= kappa_p`) at which the normalised force
/// is `f` (`0 <= f <= D`; clamped there): the inverse of [`MagicFormula::value`] below the
/// peak. A rolling tyre's force within the peak is carried by the tread's deflection, which
/// the full Magic Formula expresses as this slip; [`WheelForces::slip_ratio`](crate::vehicle::WheelForces)
/// reports it. Closed form for `E = 0` (`kappa = tan(asin(f / D) / C) / B`), Newton's method
/// from it otherwise. `kp` is the peak's slip ratio ([`MagicFormula::peak_slip`], kept by the
/// caller: it is found by bisection).
pub fn rising_slip(mf: &MagicFormula, kp: f64, f: f64) -> f64 {
    let f = f.clamp(0.0, mf.d);
    if f >= mf.d {
        return kp;
    }
    let mut k = ((f / mf.d).asin() / mf.c).tan() / mf.b;
    if mf.e != 0.0 {
        k = k.clamp(0.0, kp);
        for _ in 0..50 {
            let (v, s) = mf.eval(k);
            if s <= 0.0 {
                break;
            }
            let next = (k - (v - f) / s).clamp(0.0, kp);
            if (next - k).abs() <= 1e-15 * kp.max(1e-300) {
                k = next;
                break;
            }
            k = next;
        }
    }
    k.min(kp)
}

/// Combined slip: the lateral Magic Formula and the weighting functions that take longitudinal
/// force away under lateral slip and back (Pacejka, *Tyre and Vehicle Dynamics*, 2006, section
/// 4.3.2, the combined-slip equations of MF-Tyre 5.2 with their shifts at zero and no camber):
///
/// ```text
/// F_y0(alpha) = F_z D_y sin(C_y atan(B_y alpha - E_y (B_y alpha - atan(B_y alpha))))
/// G_xa(alpha, kappa) = cos(C_xa atan(B_xa alpha)),  B_xa = r_bx1 cos(atan(r_bx2 kappa))
/// G_yk(kappa, alpha) = cos(C_yk atan(B_yk kappa)),  B_yk = r_by1 cos(atan(r_by2 alpha))
/// F_x = G_xa F_x0(kappa),   F_y = G_yk F_y0(alpha)
/// ```
///
/// with the slip angle `alpha` in radians and the slip ratio `kappa`, both taken by magnitude
/// (the functions are even), and the weights clamped to [0, 1] (with `C > 1` the cosine turns
/// slightly negative at extreme slip; a force never turns around). With no lateral slip the
/// longitudinal tyre is the pure one and back: `G = 1`. All coefficients dimensionless.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CombinedSlip {
    /// The lateral Magic Formula over the slip angle in radians. Default `B = 18, C = 1.3,
    /// D = 1.0, E = 0`: the peak at 8.4 deg, a cornering stiffness of `B C D = 23.4` times the
    /// load per radian (a passenger-car tyre; a project choice within the usual ranges).
    pub lateral: MagicFormula,
    /// `r_bx1` (> 0): how fast longitudinal force falls with the slip angle. Default 13.
    pub r_bx1: f64,
    /// `r_bx2` (>= 0): how much less it falls at large slip ratios. Default 9.7.
    pub r_bx2: f64,
    /// `C_xa` in [0.5, 2]: the shape of that fall. Default 1.0.
    pub c_xa: f64,
    /// `r_by1` (> 0): how fast lateral force falls with the slip ratio. Default 10.6.
    pub r_by1: f64,
    /// `r_by2` (>= 0): how much less it falls at large slip angles. Default 7.8.
    pub r_by2: f64,
    /// `C_yk` in [0.5, 2]: the shape of that fall. Default 1.06.
    pub c_yk: f64,
}

impl Default for CombinedSlip {
    fn default() -> Self {
        Self {
            lateral: MagicFormula { b: 18.0, c: 1.3, d: 1.0, e: 0.0 },
            r_bx1: 13.0,
            r_bx2: 9.7,
            c_xa: 1.0,
            r_by1: 10.6,
            r_by2: 7.8,
            c_yk: 1.06,
        }
    }
}

impl CombinedSlip {
    /// Checks the coefficients; the message names the field and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        self.lateral.validate().map_err(|m| format!("lateral: {m}"))?;
        for (name, v, lo, strict) in [
            ("r_bx1", self.r_bx1, 0.0, true),
            ("r_bx2", self.r_bx2, 0.0, false),
            ("r_by1", self.r_by1, 0.0, true),
            ("r_by2", self.r_by2, 0.0, false),
        ] {
            if !(v.is_finite() && (v > lo || (!strict && v == lo)) && v <= 1000.0) {
                let range = if strict { "(0, 1000]" } else { "[0, 1000]" };
                return Err(format!("`{name}` is {v}; it must be in {range}"));
            }
        }
        for (name, v) in [("c_xa", self.c_xa), ("c_yk", self.c_yk)] {
            if !(v.is_finite() && (0.5..=2.0).contains(&v)) {
                return Err(format!("`{name}` is {v}; the shape factor must be in [0.5, 2]"));
            }
        }
        Ok(())
    }

    /// `G_xa`: the share of the pure longitudinal force left at slip angle `alpha` (rad) and
    /// slip ratio `kappa`, in [0, 1].
    pub fn longitudinal_weight(&self, alpha: f64, kappa: f64) -> f64 {
        let b = self.r_bx1 * (self.r_bx2 * kappa.abs()).atan().cos();
        (self.c_xa * (b * alpha.abs()).atan()).cos().clamp(0.0, 1.0)
    }

    /// `G_yk`: the share of the pure lateral force left at slip ratio `kappa` and slip angle
    /// `alpha` (rad), in [0, 1].
    pub fn lateral_weight(&self, kappa: f64, alpha: f64) -> f64 {
        let b = self.r_by1 * (self.r_by2 * alpha.abs()).atan().cos();
        (self.c_yk * (b * kappa.abs()).atan()).cos().clamp(0.0, 1.0)
    }

    /// The pure lateral force per unit load `F_y0 / F_z` at slip angle `alpha` (rad), signed
    /// like `alpha` (the force on the tyre opposes it: the caller negates).
    pub fn lateral_value(&self, alpha: f64) -> f64 {
        self.lateral.value(alpha.abs()).copysign(alpha)
    }

    /// The lateral cornering stiffness per unit load, `B_y C_y D_y` (1/rad): the slope of
    /// `F_y0 / F_z` at zero slip angle.
    pub fn cornering_stiffness(&self) -> f64 {
        self.lateral.b * self.lateral.c * self.lateral.d
    }
}

/// `sin(C atan x)` and `cos(C atan x)`. For `C = 3/2` (the default, and every shipped tyre)
/// and `x >= 0` they follow from the angle `t = atan x` and its half without a libm call:
/// `cos t = 1 / sqrt(1 + x^2)`, `sin t = x cos t`, `cos(t/2) = sqrt((1 + cos t) / 2)`,
/// `sin(t/2) = sin t / (2 cos(t/2))` (no cancellation at small `t`), and
/// `sin(3t/2) = sin t cos(t/2) + cos t sin(t/2)`, `cos(3t/2) = cos t cos(t/2) - sin t sin(t/2)`:
/// two square roots and two divisions against an arctangent and a sine-cosine pair, agreeing
/// to a few ulps. Any other `C` (or a negative `x`, which only `E != 0` gives) takes the
/// arctangent and the sine and cosine. Without `COS` the cosine is left at zero (a force
/// evaluation reads the sine alone), the sine the same bit for bit.
#[inline(always)]
fn sin_cos_c_atan<const COS: bool>(c: f64, x: f64) -> (f64, f64) {
    if c == 1.5 && x >= 0.0 {
        let cos_t = 1.0 / (1.0 + x * x).sqrt();
        let sin_t = x * cos_t;
        let cos_h = (0.5 * (1.0 + cos_t)).sqrt();
        let sin_h = sin_t / (2.0 * cos_h);
        return (sin_t * cos_h + cos_t * sin_h, if COS { cos_t * cos_h - sin_t * sin_h } else { 0.0 });
    }
    let a = c * x.atan();
    if COS { a.sin_cos() } else { (a.sin(), 0.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The algebraic `C = 3/2` path against the arctangent and the sine and cosine, over slip
    /// ratios from the peak far into the slide (`x = B kappa` from 1e-6 to 1e6), and at zero.
    /// Both are within an ulp or so of the exact values: they agree to 1e-15 absolute (the
    /// values lie in [-1, 1]).
    #[test]
    fn the_value_alone_is_the_value_of_eval() {
        // The force evaluation's value-only path must give eval's value bit for bit: the
        // default (C = 3/2 algebraic), another C (libm), and E != 0 (the inner arctangent).
        for mf in [
            MagicFormula::default(),
            MagicFormula { b: 10.0, c: 1.9, d: 1.0, e: 0.97 },
            MagicFormula { b: 8.0, c: 1.3, d: 0.9, e: -0.5 },
        ] {
            for k in 0..400 {
                let kappa = k as f64 * 0.005;
                assert_eq!(mf.value(kappa).to_bits(), mf.eval(kappa).0.to_bits(), "{mf:?} at {kappa}");
            }
        }
    }

    #[test]
    fn three_halves_without_libm_agrees_with_atan_sin_cos() {
        let mut worst: f64 = 0.0;
        let mut x = 1e-6;
        while x < 1e6 {
            let (s, c) = sin_cos_c_atan::<true>(1.5, x);
            let a = 1.5 * x.atan();
            worst = worst.max((s - a.sin()).abs()).max((c - a.cos()).abs());
            x *= 1.01;
        }
        assert!(worst < 1e-15, "differs by {worst:e}");
        assert_eq!(sin_cos_c_atan::<true>(1.5, 0.0), (0.0, 1.0));
        // Other shape factors take the general path.
        let (s, c) = sin_cos_c_atan::<true>(1.9, 2.0);
        assert_eq!((s, c), (1.9 * 2f64.atan()).sin_cos());
    }

    #[test]
    fn peak_is_d_at_peak_slip_and_slope_vanishes_there() {
        let mf = MagicFormula::default();
        let kp = mf.peak_slip();
        let (f, s) = mf.eval(kp);
        // The bisection resolves kp to rounding; f and its slope follow to ~1e-12.
        assert!((f - mf.d).abs() < 1e-12, "{f}");
        assert!(s.abs() < 1e-6, "{s}");
        // atan(B k) = pi / (2 C) = pi / 3 for E = 0: k = sqrt(3) / 12.
        assert!((kp - 3f64.sqrt() / 12.0).abs() < 1e-12, "{kp}");
    }

    #[test]
    fn slope_matches_finite_difference() {
        let mf = MagicFormula::default();
        for k in [0.01, 0.1, 0.3, 1.0] {
            let h = 1e-6;
            let fd = (mf.eval(k + h).0 - mf.eval(k - h).0) / (2.0 * h);
            // Central difference error O(h^2 f''') ~ 1e-9 here.
            assert!((fd - mf.eval(k).1).abs() < 1e-6, "{k}");
        }
    }

    #[test]
    fn sliding_force_falls_towards_the_asymptote() {
        let mf = MagicFormula::default();
        let asym = mf.d * (std::f64::consts::FRAC_PI_2 * mf.c).sin();
        assert!(mf.eval(10.0).0 < mf.eval(0.5).0);
        assert!((mf.eval(1e6).0 - asym).abs() < 1e-3);
    }

    #[test]
    fn rising_slip_inverts_the_rising_branch() {
        // Closed form (E = 0) and Newton (E != 0): the force at the returned slip is the force
        // asked for, to rounding of the arcsine and tangent (1e-12 of the peak).
        for mf in [MagicFormula::default(), MagicFormula { b: 10.0, c: 1.9, d: 1.0, e: 0.97 }] {
            let kp = mf.peak_slip();
            for k in 0..=100 {
                let f = mf.d * k as f64 / 100.0;
                let kappa = rising_slip(&mf, kp, f);
                assert!((0.0..=kp).contains(&kappa), "{kappa} outside [0, {kp}]");
                assert!((mf.value(kappa) - f).abs() < 1e-9, "{mf:?}: F({kappa}) = {} for {f}", mf.value(kappa));
            }
            assert_eq!(rising_slip(&mf, kp, 2.0 * mf.d), kp, "beyond the peak: the peak's slip");
        }
    }

    #[test]
    fn combined_slip_weights_are_one_without_the_other_slip_and_fall_with_it() {
        let cs = CombinedSlip::default();
        assert_eq!(cs.longitudinal_weight(0.0, 0.3), 1.0);
        assert_eq!(cs.lateral_weight(0.0, 0.1), 1.0);
        let mut last = (1.0, 1.0);
        for k in 1..=60 {
            let x = k as f64 * 0.01;
            let (gx, gy) = (cs.longitudinal_weight(x, 0.05), cs.lateral_weight(x, 0.05));
            assert!(gx < last.0 && gy < last.1 && gx >= 0.0 && gy >= 0.0, "not falling at {x}");
            // Even in both slips.
            assert_eq!(gx, cs.longitudinal_weight(-x, -0.05));
            assert_eq!(gy, cs.lateral_weight(-x, -0.05));
            last = (gx, gy);
        }
    }

    #[test]
    fn combined_slip_weights_have_the_published_closed_forms() {
        // With C_xa = 1, G_xa = cos(atan(B alpha)) = 1 / sqrt(1 + (B alpha)^2) and
        // B = r_bx1 / sqrt(1 + (r_bx2 kappa)^2) (Pacejka 2006, eqs. of section 4.3.2 with the
        // shifts zero): the weight at 5 deg and 10 % slip from these by hand.
        let cs = CombinedSlip::default();
        let (alpha, kappa) = (5f64.to_radians(), 0.1);
        let b = cs.r_bx1 / (1.0 + (cs.r_bx2 * kappa).powi(2)).sqrt();
        let expected = 1.0 / (1.0 + (b * alpha).powi(2)).sqrt();
        assert!((cs.longitudinal_weight(alpha, kappa) - expected).abs() < 1e-15);
        // The lateral curve's slope at zero is the cornering stiffness B C D.
        let h = 1e-7;
        let slope = cs.lateral_value(h) / h;
        assert!((slope - cs.cornering_stiffness()).abs() < 1e-4 * cs.cornering_stiffness(), "{slope}");
        // Its peak D at tan(pi / 2C) / B (E = 0): 8.4 deg for the defaults.
        let peak = (std::f64::consts::FRAC_PI_2 / cs.lateral.c).tan() / cs.lateral.b;
        assert!((cs.lateral_value(peak) - cs.lateral.d).abs() < 1e-12);
        assert!((peak.to_degrees() - 8.4).abs() < 0.05, "{}", peak.to_degrees());
    }

    #[test]
    fn combined_forces_stay_inside_the_friction_ellipse() {
        // The combined force (G_xa F_x0, G_yk F_y0) over a grid of slip ratios and angles never
        // leaves the friction ellipse of the two peaks by more than the Magic Formula's own
        // shape allows (the weights are fitted to tyre data, not an exact ellipse: 10 %).
        let (mf, cs) = (MagicFormula::default(), CombinedSlip::default());
        let mut worst: f64 = 0.0;
        for i in 0..=50 {
            for j in 0..=50 {
                let (kappa, alpha) = (i as f64 * 0.02, j as f64 * 0.006);
                let fx = cs.longitudinal_weight(alpha, kappa) * mf.value(kappa) / mf.d;
                let fy = cs.lateral_weight(kappa, alpha) * cs.lateral_value(alpha) / cs.lateral.d;
                worst = worst.max(fx.hypot(fy));
            }
        }
        assert!(worst < 1.1, "the combined force reaches {worst} of the ellipse");
    }

    #[test]
    fn combined_slip_coefficients_are_checked() {
        assert!(CombinedSlip::default().validate().is_ok());
        let bad = CombinedSlip { r_bx1: 0.0, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("r_bx1"));
        let bad = CombinedSlip { c_yk: f64::NAN, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("c_yk"));
    }
}
