//! Hydrodynamic torque converter: the pump (impeller, on the crankshaft) drives the turbine
//! (the gearbox input) through the oil; the stator, on a freewheel to the housing, multiplies
//! the torque below the coupling point.
//!
//! # The law
//! With the speed ratio `SR = w_t / w_p` (turbine over pump, both relative to the housing), the
//! capacity factor `K(SR)` and the torque ratio `TR(SR)` (see
//! `shared/reference/torque_converter.md`):
//!
//! ```text
//! drive (|w_p| >= |w_t|):  T_p = (w_p / K(SR))^2 g(SR),   T_t = TR(SR) T_p
//! coast (|w_t| >  |w_p|):  T_t = (w_t / K_c(SR'))^2 g(SR'), T_p = T_t,   SR' = w_p / w_t
//! ```
//!
//! `T_p` loads the pump, `T_t` drives the turbine, the housing takes `T_p - T_t` (the stator
//! reaction). In coast the turbine drives the pump; the stator freewheels, so the converter is a
//! plain fluid coupling (torque ratio 1; the Chrono mirror rule, with `K_c = K` unless a coast
//! table is given). A negative speed ratio (the turbine turning against the pump) is evaluated
//! at `SR = 0`, stall. The law is odd: reversing both speeds reverses every torque.
//!
//! `g` makes the torque vanish at `SR = 1`: a fluid coupling at zero slip transmits nothing.
//! Published tables end with a finite `K(1)` (ADVISOR's 144K: 304.5 rpm/sqrt(N m)), which would
//! make the torque jump where the lock-up clutch holds the two shafts together; `g` falls
//! linearly from 1 to 0 over the table's last interval (0.95..1 for the 144K), and is 1 below.
//! The efficiency `SR TR` must not exceed 1 at any table point, so the converter only
//! dissipates: `P_loss = T_p w_p - T_t w_t = T_p w_p (1 - SR TR) >= 0`.

use crate::torque_map::RPM;
use crate::{Locus, Table1D};
use serde::{Deserialize, Serialize};

/// The smallest K-factor a converter table may hold, rpm/sqrt(N m): 1.
pub const MIN_K_FACTOR: f64 = 1.0;

/// The converter's characteristic as written in files: `K` in rpm/sqrt(N m) (the unit of most
/// published data; 1 rpm/sqrt(N m) = pi/30 (rad/s)/sqrt(N m)) and `TR`, both over the speed
/// ratio from 0 to 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConverterSpec {
    /// Capacity factor `K = n_pump / sqrt(T_pump)` over `SR`, rpm/sqrt(N m) (> 0, `SR` from 0
    /// to 1).
    pub k_factor: Table1D,
    /// Torque ratio `T_turbine / T_pump` over `SR` (> 0, with `SR TR <= 1`).
    pub torque_ratio: Table1D,
    /// Coast capacity factor over `SR' = w_p / w_t` (turbine driving), rpm/sqrt(N m). Default:
    /// the drive table mirrored (`K_c(x) = K(x)`).
    #[serde(default)]
    pub coast_k_factor: Option<Table1D>,
}

impl ConverterSpec {
    /// The NREL ADVISOR "144K" converter (10.75 in; TX_AUTO4, JDM & Associates 1998), the
    /// default asset: `K` is the tabulated pump speed at 100 N m divided by 10.
    pub fn advisor_144k() -> Self {
        const SR: [f64; 29] = [
            0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45,
            0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 1.00,
        ];
        const TR: [f64; 29] = [
            2.00, 1.99, 1.98, 1.96, 1.95, 1.94, 1.93, 1.92, 1.91, 1.89, 1.88, 1.83, 1.77, 1.72, 1.66, 1.60, 1.55, 1.49,
            1.43, 1.38, 1.32, 1.26, 1.21, 1.15, 1.10, 1.04, 1.00, 1.00, 1.00,
        ];
        const PUMP_RPM: [f64; 29] = [
            1444.0, 1443.0, 1446.0, 1448.0, 1450.0, 1453.0, 1456.0, 1459.0, 1461.0, 1464.0, 1466.0, 1480.0, 1494.0,
            1509.0, 1525.0, 1549.0, 1574.0, 1604.0, 1637.0, 1678.0, 1722.0, 1775.0, 1833.0, 1899.0, 1973.0, 2107.0,
            2272.0, 3044.0, 3045.0,
        ];
        let table = |y: &dyn Fn(usize) -> f64| Table1D::new((0..29).map(|i| (SR[i], y(i))).collect()).expect("sorted");
        Self { k_factor: table(&|i| PUMP_RPM[i] / 10.0), torque_ratio: table(&|i| TR[i]), coast_k_factor: None }
    }

    /// Checks the tables: what is wrong and what is allowed. A K-factor is at least
    /// [`MIN_K_FACTOR`] and at most 1e4 rpm/sqrt(N m); a torque ratio is positive and at most 1e4,
    /// its efficiency `SR TR` at most 1.
    pub fn validate(&self) -> Result<(), String> {
        let covers = |t: &Table1D, what: &str| -> Result<(), String> {
            t.validate().map_err(|e| format!("`{what}`: {e}"))?;
            let p = t.points();
            if p.len() < 2 || p[0].0 != 0.0 || p[p.len() - 1].0 != 1.0 {
                return Err(format!("`{what}` must run over the speed ratio from 0 to 1 (at least two points)"));
            }
            if t.y_range().0 <= 0.0 {
                return Err(format!("`{what}` values must be > 0"));
            }
            // (A K-factor in rpm / sqrt(N m), a torque ratio: both well under 1e4.)
            if let Some(why) = crate::limits::table_outside(p, 1.0, 1e4) {
                return Err(format!("`{what}`: {why}"));
            }
            Ok(())
        };
        // A K-factor under 1 rpm / sqrt(N m) would take a million N m at 1,000 rpm: none is
        // built (road vehicles run from about 50, a heavy truck, to 300).
        let plausible_k = |t: &Table1D, what: &str| -> Result<(), String> {
            covers(t, what)?;
            if t.y_range().0 < MIN_K_FACTOR {
                return Err(format!(
                    "`{what}` values must be at least {MIN_K_FACTOR} rpm/sqrt(N m) (the plausible range), not {}",
                    t.y_range().0
                ));
            }
            Ok(())
        };
        plausible_k(&self.k_factor, "k_factor")?;
        covers(&self.torque_ratio, "torque_ratio")?;
        if let Some(c) = &self.coast_k_factor {
            plausible_k(c, "coast_k_factor")?;
        }
        for &(sr, tr) in self.torque_ratio.points() {
            if sr * tr > 1.0 + 1e-12 {
                return Err(format!(
                    "`torque_ratio` {tr} at SR {sr} gives an efficiency SR TR = {:.3} > 1; a converter cannot make power",
                    sr * tr
                ));
            }
        }
        Ok(())
    }

    /// The run-time map (`K` converted to (rad/s)/sqrt(N m)). Validate first.
    pub fn build(&self) -> ConverterMap {
        let rad = |t: &Table1D| Table1D::new(t.points().iter().map(|&(x, k)| (x, k * RPM)).collect()).expect("valid");
        let k = rad(&self.k_factor);
        let p = k.points();
        let taper_from = p[p.len() - 2].0;
        let tr_on_k_grid = self.torque_ratio.same_abscissae(&k);
        ConverterMap {
            kc: self.coast_k_factor.as_ref().map_or_else(|| k.clone(), rad),
            k,
            tr_on_k_grid,
            tr: self.torque_ratio.clone(),
            taper_from,
        }
    }
}

impl Default for ConverterSpec {
    fn default() -> Self {
        Self::advisor_144k()
    }
}

/// The converter law at run time: `K` in (rad/s)/sqrt(N m).
#[derive(Debug, Clone, PartialEq)]
pub struct ConverterMap {
    /// Drive capacity factor over `SR`.
    pub k: Table1D,
    /// Torque ratio over `SR`.
    pub tr: Table1D,
    /// Coast capacity factor over `w_p / w_t`.
    pub kc: Table1D,
    /// Speed ratio from which the torque is tapered to 0 at `SR = 1`.
    pub taper_from: f64,
    /// `tr` is tabulated at the speed ratios of `k` (ADVISOR's tables are): one search finds
    /// both.
    tr_on_k_grid: bool,
}

/// Converter torques at one instant and their derivatives.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConverterTorques {
    /// Torque the oil applies to the pump, N m (negative while the engine drives).
    pub pump: f64,
    /// Torque the oil applies to the turbine, N m.
    pub turbine: f64,
    /// `d pump / d w_p`, `d pump / d w_t`.
    pub dpump: [f64; 2],
    /// `d turbine / d w_p`, `d turbine / d w_t`.
    pub dturbine: [f64; 2],
}

impl ConverterMap {
    /// `g / K^2` and (with `SLOPE`, else 0) its slope at speed ratio `sr` in [0, 1].
    #[inline(always)]
    fn capacity<const SLOPE: bool>(&self, k: &Table1D, locus: Locus, sr: f64) -> (f64, f64) {
        if sr >= 1.0 {
            return (0.0, 0.0);
        }
        let (kv, dk) = k.at(locus, sr);
        let (g, dg) = if sr > self.taper_from {
            let span = 1.0 - self.taper_from;
            ((1.0 - sr) / span, -1.0 / span)
        } else {
            (1.0, 0.0)
        };
        let k2 = kv * kv;
        (g / k2, if SLOPE { dg / k2 - 2.0 * g * dk / (k2 * kv) } else { 0.0 })
    }

    /// Torques on pump and turbine at speeds `w_p`, `w_t` relative to the housing, rad/s, and
    /// their partial derivatives.
    #[inline]
    pub fn eval(&self, w_p: f64, w_t: f64) -> ConverterTorques {
        self.eval_in::<true>(w_p, w_t)
    }

    /// The torques of [`ConverterMap::eval`] alone (its derivatives zero), as a force
    /// evaluation needs them: the same values, bit for bit, without the divisions the
    /// derivatives take.
    #[inline]
    pub fn torques(&self, w_p: f64, w_t: f64) -> ConverterTorques {
        self.eval_in::<false>(w_p, w_t)
    }

    /// [`ConverterMap::eval`] with the derivatives formed (`DERIV`) or left at zero.
    #[inline(always)]
    fn eval_in<const DERIV: bool>(&self, w_p: f64, w_t: f64) -> ConverterTorques {
        let drive = w_p.abs() >= w_t.abs();
        let (wd, wo) = if drive { (w_p, w_t) } else { (w_t, w_p) };
        if wd == 0.0 || !wd.is_finite() || !wo.is_finite() {
            return ConverterTorques::default();
        }
        let s = wd.signum();
        let a = wd.abs();
        let raw = wo / wd;
        // Speed ratio and its partials with respect to (w_d, w_o).
        let (sr, dsr) = if raw <= 0.0 {
            (0.0, [0.0, 0.0])
        } else if DERIV {
            (raw, [-raw / wd, 1.0 / wd])
        } else {
            (raw, [0.0, 0.0])
        };
        let k = if drive { &self.k } else { &self.kc };
        // (Validated tables end at SR 1: a ratio at or past it is at their last row.)
        let locus = if sr >= 1.0 { Locus::Last } else { k.locate(sr) };
        let (c, dc) = self.capacity::<DERIV>(k, locus, sr);
        let t = a * a * c;
        let dt = [2.0 * a * s * c + a * a * dc * dsr[0], a * a * dc * dsr[1]];
        if drive {
            let (tr, dtr) = if self.tr_on_k_grid { self.tr.at(locus, sr) } else { self.tr.eval_with_slope(sr) };
            let tt = tr * t;
            let dtt = [dtr * dsr[0] * t + tr * dt[0], dtr * dsr[1] * t + tr * dt[1]];
            // (w_d, w_o) = (w_p, w_t).
            ConverterTorques {
                pump: -s * t,
                turbine: s * tt,
                dpump: [-s * dt[0], -s * dt[1]],
                dturbine: [s * dtt[0], s * dtt[1]],
            }
        } else {
            // (w_d, w_o) = (w_t, w_p): the turbine drives, the pump is driven, torque ratio 1.
            ConverterTorques {
                pump: s * t,
                turbine: -s * t,
                dpump: [s * dt[1], s * dt[0]],
                dturbine: [-s * dt[1], -s * dt[0]],
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> ConverterMap {
        let spec = ConverterSpec::advisor_144k();
        spec.validate().unwrap();
        spec.build()
    }

    #[test]
    fn stall_torque_follows_the_k_factor() {
        // ADVISOR: 300 N m at stall needs 144.4 sqrt(300) = 2501 rpm.
        let w = 144.4 * 300f64.sqrt() * RPM;
        let t = map().eval(w, 0.0);
        assert!((t.pump + 300.0).abs() < 1e-9, "{}", t.pump);
        assert!((t.turbine - 600.0).abs() < 1e-9, "torque ratio 2 at stall: {}", t.turbine);
    }

    #[test]
    fn coupling_point_and_zero_slip() {
        let m = map();
        // SR 0.9: K 227.2 rpm/sqrt(N m), TR 1.
        let t = m.eval(2272.0 * RPM, 0.9 * 2272.0 * RPM);
        assert!((t.pump + 100.0).abs() < 1e-9 && (t.turbine - 100.0).abs() < 1e-9, "{t:?}");
        // Zero slip transmits nothing, from either side.
        assert_eq!(m.eval(300.0, 300.0).pump, 0.0);
        let near = m.eval(300.0, 300.0 * (1.0 - 1e-9));
        assert!(near.pump.abs() < 1e-4, "{near:?}");
        let coast = m.eval(300.0 * (1.0 - 1e-9), 300.0);
        assert!(coast.pump.abs() < 1e-4, "{coast:?}");
    }

    #[test]
    fn coast_is_a_coupling_and_dissipates() {
        let t = map().eval(200.0, 250.0);
        assert!(t.turbine < 0.0 && t.pump > 0.0);
        assert_eq!(t.pump, -t.turbine);
        assert!(t.pump * 200.0 + t.turbine * 250.0 < 0.0);
    }

    #[test]
    fn a_torque_ratio_on_its_own_grid_is_searched_on_its_own() {
        // The 144K torque ratio on every other speed ratio of its grid (the rows kept, so the
        // shared rows agree); between them the coarse table interpolates its own way.
        let mut spec = ConverterSpec::advisor_144k();
        let fine = spec.torque_ratio.clone();
        let coarse: Vec<(f64, f64)> = fine.points().iter().step_by(2).copied().collect();
        assert_eq!(coarse.last().unwrap().0, 1.0, "the grid's end is kept");
        spec.torque_ratio = Table1D::new(coarse).unwrap();
        spec.validate().unwrap();
        let (shared, own) = (map(), spec.build());
        assert!(shared.tr_on_k_grid && !own.tr_on_k_grid);
        let w_p = 200.0;
        for &sr in &[0.0, 0.02, 0.25, 0.5, 0.8, 0.999] {
            let (a, b) = (shared.eval(w_p, sr * w_p), own.eval(w_p, sr * w_p));
            // Same capacity: the pump torques agree; the turbine's is the pump's times the
            // torque ratio each table gives (to rounding: the law multiplies in another order).
            assert_eq!(a.pump, b.pump, "SR {sr}");
            let tr = |t: &Table1D| t.eval(sr) * -a.pump;
            assert!((b.turbine - tr(&spec.torque_ratio)).abs() <= 1e-12 * b.turbine.abs(), "SR {sr}: {b:?}");
            assert!((a.turbine - tr(&fine)).abs() <= 1e-12 * a.turbine.abs(), "SR {sr}: {a:?}");
        }
    }

    #[test]
    fn the_torques_alone_are_the_torques_of_eval() {
        // A force evaluation takes the derivative-free path: its torques must be eval's, bit
        // for bit, in drive, coast, the taper near SR 1, and lock-up.
        let m = map();
        for &(wp, wt) in &[
            (300.0, 0.0),
            (300.0, 120.0),
            (300.0, 290.0),
            (300.0, 299.9),
            (200.0, 250.0),
            (-80.0, -20.0),
            (150.0, 150.0),
        ] {
            let (a, b) = (m.eval(wp, wt), m.torques(wp, wt));
            assert_eq!(
                (a.pump.to_bits(), a.turbine.to_bits()),
                (b.pump.to_bits(), b.turbine.to_bits()),
                "({wp}, {wt})"
            );
        }
    }

    #[test]
    fn the_law_is_odd_and_never_makes_power() {
        let m = map();
        for &(wp, wt) in &[(100.0, 0.0), (300.0, 120.0), (300.0, 290.0), (100.0, -50.0), (80.0, 200.0), (0.0, 50.0)] {
            let a = m.eval(wp, wt);
            let b = m.eval(-wp, -wt);
            assert_eq!((a.pump, a.turbine), (-b.pump, -b.turbine));
            assert!(a.pump * wp + a.turbine * wt <= 1e-12, "({wp}, {wt}) makes power: {a:?}");
        }
    }

    #[test]
    fn derivatives_match_finite_differences() {
        let m = map();
        for &(wp, wt) in &[(250.0, 60.0), (250.0, 245.0), (-180.0, -30.0), (124.0, 200.0), (300.0, 4.5)] {
            let t = m.eval(wp, wt);
            let h = 1e-6;
            for (k, (dp, dt)) in [(h, 0.0), (0.0, h)].into_iter().enumerate() {
                let up = m.eval(wp + dp, wt + dt);
                let dn = m.eval(wp - dp, wt - dt);
                let fd_p = (up.pump - dn.pump) / (2.0 * h);
                let fd_t = (up.turbine - dn.turbine) / (2.0 * h);
                // Central differences on a piecewise-linear table: exact up to rounding.
                assert!((fd_p - t.dpump[k]).abs() < 1e-5 * (1.0 + fd_p.abs()), "{wp} {wt} {k}: {fd_p} {:?}", t);
                assert!((fd_t - t.dturbine[k]).abs() < 1e-5 * (1.0 + fd_t.abs()), "{wp} {wt} {k}: {fd_t} {:?}", t);
            }
        }
    }

    #[test]
    fn tables_that_make_power_are_rejected() {
        let mut spec = ConverterSpec::advisor_144k();
        spec.torque_ratio = Table1D::new(vec![(0.0, 2.0), (1.0, 1.2)]).unwrap();
        assert!(spec.validate().unwrap_err().contains("efficiency"));
        spec.torque_ratio = Table1D::new(vec![(0.0, 2.0), (0.9, 1.0)]).unwrap();
        assert!(spec.validate().unwrap_err().contains("from 0 to 1"));
    }
}
