//! The `automatic` section of a vehicle file: gearbox, torque converter with lock-up clutch,
//! park pawl, shift schedule, shift control and element heat. Every value is SI unless its name
//! says otherwise (`*_rpm`, `*_kmh`); every field has a default except the gearbox.

use super::gearbox::GearboxSpec;
use crate::converter::ConverterSpec;
use crate::vehicle::SpecError;
use crate::vehicle::spec::{check_pack, err, pos};
use crate::{Table1D, TorqueMapSpec};
use serde::{Deserialize, Serialize};

/// Where the gear train comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GearboxSource {
    /// A gearbox file, relative to the vehicle file (e.g. `"../gearboxes/zf_8hp70.ron"`).
    File(String),
    /// The gearbox written out in place.
    Inline(Box<GearboxSpec>),
}

/// A planetary automatic transmission with its torque converter and controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutomaticSpec {
    /// The gear train.
    pub gearbox: GearboxSource,
    /// Converter maps. Default: the NREL ADVISOR 144K converter.
    #[serde(default)]
    pub converter: ConverterSpec,
    /// Impeller inertia with half the oil, added to the crankshaft, kg m^2. Default 0.109 (ADVISOR).
    #[serde(default = "d_pump")]
    pub pump_inertia: f64,
    /// Turbine inertia with half the oil, kg m^2. Default 0.056 (ADVISOR).
    #[serde(default = "d_turbine")]
    pub turbine_inertia: f64,
    /// Output shaft inertia, kg m^2. Default 0.02.
    #[serde(default = "d_output")]
    pub output_inertia: f64,
    /// Converter lock-up clutch.
    #[serde(default)]
    pub lockup: LockupSpec,
    /// Park pawl.
    #[serde(default)]
    pub park: ParkSpec,
    /// Shift schedule.
    #[serde(default)]
    pub schedule: ScheduleSpec,
    /// Clutch-to-clutch shift control.
    #[serde(default)]
    pub shift: ShiftControlSpec,
    /// Heat of the shift elements and the lock-up clutch.
    #[serde(default)]
    pub thermal: ElementThermalSpec,
}

fn d_pump() -> f64 {
    0.109
}
fn d_turbine() -> f64 {
    0.056
}
fn d_output() -> f64 {
    0.02
}

/// The lock-up clutch in parallel with the converter, and when it closes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LockupSpec {
    /// Friction coefficient over slip, rad/s. Default 0.12.
    pub mu: Table1D,
    /// Static over kinetic friction. Default 1.05.
    pub peak: f64,
    /// Friction surfaces. Default 2.
    pub surfaces: u32,
    /// Outer radius, m. Default 0.13.
    pub outer_radius: f64,
    /// Inner radius, m. Default 0.10.
    pub inner_radius: f64,
    /// Clamp force at full apply, N. Default 18000 (0.12 * 0.23 m * 18 kN = 497 N m).
    pub max_force: f64,
    /// Lowest gear in which it closes. Default 2.
    pub min_gear: u32,
    /// Turbine speed above which it closes, rpm. Default 1400.
    pub on_rpm: f64,
    /// Turbine speed below which it opens, rpm. Default 1100.
    pub off_rpm: f64,
    /// Time to ramp from open to full apply, s. Default 0.4 (a soft, slipping engagement).
    pub apply_time: f64,
    /// Controlled slip between `on_rpm` and `lock_rpm`: the engine runs this far above the
    /// turbine, rpm (0: no slip control, the clutch closes fully at `on_rpm`). Default 40.
    pub slip_rpm: f64,
    /// Turbine speed above which the lock-up closes fully, rpm. Default 1800.
    pub lock_rpm: f64,
    /// Proportional gain of the slip controller, N m per rad/s (the integral gain is five times
    /// it, per second). Default 4.
    pub slip_gain: f64,
}

impl Default for LockupSpec {
    fn default() -> Self {
        Self {
            mu: Table1D::constant(0.12),
            peak: 1.05,
            surfaces: 2,
            outer_radius: 0.13,
            inner_radius: 0.10,
            max_force: 18000.0,
            min_gear: 2,
            on_rpm: 1400.0,
            off_rpm: 1100.0,
            apply_time: 0.4,
            slip_rpm: 40.0,
            lock_rpm: 1800.0,
            slip_gain: 4.0,
        }
    }
}

impl LockupSpec {
    /// Geometry factor `N (r_o + r_i) / 2`, m.
    pub fn cgeo(&self) -> f64 {
        self.surfaces as f64 * (self.outer_radius + self.inner_radius) / 2.0
    }
}

/// The park pawl: a tooth that drops into a wheel on the output shaft.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParkSpec {
    /// Vehicle speed above which the pawl ratchets over the teeth instead of engaging, km/h.
    /// Default 5.
    pub max_engage_kmh: f64,
    /// Torque the engaged pawl holds at the output shaft, N m. Default 20000.
    pub holding_torque: f64,
}

impl Default for ParkSpec {
    fn default() -> Self {
        Self { max_engage_kmh: 5.0, holding_torque: 20000.0 }
    }
}

/// When to shift: turbine-speed lines over throttle. In gear `k` with ratio `r_k` the box
/// shifts up when the turbine exceeds `upshift_rpm(throttle)`, i.e. above the output speed
/// `upshift_rpm / r_k`, and down when it falls below `downshift_rpm(throttle)`; these are the
/// shift lines over throttle x output speed, one pair per gear, with the hysteresis the
/// validation checks (after an upshift the turbine must stay above the downshift line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleSpec {
    /// Upshift turbine speed over throttle [0, 1], rpm. Default 1600 rpm at 0 to 6000 at 1.
    pub upshift_rpm: Table1D,
    /// Own upshift lines for some gears: `(gear, turbine rpm over throttle)`, e.g. overdrive
    /// gears left early. Default none.
    pub upshift_by_gear: Vec<(u32, Table1D)>,
    /// Downshift turbine speed over throttle [0, 1], rpm. Default 1000 rpm at 0 to 2600 at 1.
    pub downshift_rpm: Table1D,
    /// Throttle above which a pedal stamp is a kickdown. Default 0.9.
    pub kickdown_throttle: f64,
    /// Shortest time between two shifts, s (damps hunting). Default 0.6.
    pub min_time_in_gear: f64,
    /// Tyre slip speed above which no shift starts (a wheel spins or locks), m/s. Default 1.5.
    pub wheelspin_slip: f64,
}

impl Default for ScheduleSpec {
    fn default() -> Self {
        Self {
            upshift_rpm: Table1D::new(vec![(0.0, 1600.0), (0.5, 2600.0), (1.0, 6000.0)]).expect("sorted"),
            upshift_by_gear: Vec::new(),
            downshift_rpm: Table1D::new(vec![(0.0, 1000.0), (0.5, 1300.0), (1.0, 2600.0)]).expect("sorted"),
            kickdown_throttle: 0.9,
            min_time_in_gear: 0.6,
            wheelspin_slip: 1.5,
        }
    }
}

/// Clutch-to-clutch shift control (see [`super::tcu`] for the phases).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShiftControlSpec {
    /// Torque phase: the load moves from the off-going to the on-coming element, s. Default 0.12.
    pub torque_phase: f64,
    /// Target inertia phase: the slipping element brings the input to the new speed, s.
    /// Default 0.25.
    pub inertia_phase: f64,
    /// End phase: the on-coming pressure rises to full (from no lower than the pressure it
    /// locked at), s. Default 0.08.
    pub end_phase: f64,
    /// Capacity of the off-going element over the torque it carries while the on-coming fills.
    /// Default 1.3.
    pub hold_margin: f64,
    /// Engine torque reduction during the inertia phase of a power-on upshift, [0, 1].
    /// Default 0.35.
    pub torque_reduction: f64,
    /// Solenoid and valve lag: the pressure follows its command with this time constant, s.
    /// Default 0.015.
    pub pressure_lag: f64,
    /// Garage shifts (N to D or R): time to apply the gear's elements, s. Default 0.5.
    pub garage_time: f64,
    /// Largest time a shift may take before it is finished by force, s. Default 1.5.
    pub timeout: f64,
}

impl Default for ShiftControlSpec {
    fn default() -> Self {
        Self {
            torque_phase: 0.12,
            inertia_phase: 0.25,
            end_phase: 0.08,
            hold_margin: 1.3,
            torque_reduction: 0.35,
            pressure_lag: 0.015,
            garage_time: 0.5,
            timeout: 1.5,
        }
    }
}

/// Lumped heat of each shift element: `C dT/dt = P - h (T - T_oil)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ElementThermalSpec {
    /// Heat capacity of an element's plates, J/K. Default 600 (about 1.3 kg of steel).
    pub heat_capacity: f64,
    /// Heat carried off by the cooling oil, W/K. Default 20.
    pub cooling: f64,
    /// Oil temperature, deg C. Default 90.
    pub oil: f64,
    /// Temperature the plates must stay below (friction material limit), deg C. Default 250.
    pub limit: f64,
}

impl Default for ElementThermalSpec {
    fn default() -> Self {
        Self { heat_capacity: 600.0, cooling: 20.0, oil: 90.0, limit: 250.0 }
    }
}

impl ScheduleSpec {
    /// The upshift line out of forward gear `gear` (1-based).
    pub fn upshift(&self, gear: usize) -> &Table1D {
        self.upshift_by_gear.iter().find(|(g, _)| *g as usize == gear).map_or(&self.upshift_rpm, |(_, t)| t)
    }
}

impl AutomaticSpec {
    /// The gear train (after [`AutomaticSpec::resolve`] for a file source).
    pub fn gearbox(&self) -> Option<&GearboxSpec> {
        match &self.gearbox {
            GearboxSource::Inline(g) => Some(g),
            GearboxSource::File(_) => None,
        }
    }

    /// Loads a file gearbox relative to `dir`; errors carry the gearbox file's position.
    pub fn resolve(&mut self, dir: &std::path::Path) -> Result<(), crate::ScenarioError> {
        if let GearboxSource::File(f) = &self.gearbox {
            let g = GearboxSpec::load(&dir.join(f))?;
            self.gearbox = GearboxSource::Inline(Box::new(g));
        }
        Ok(())
    }

    /// Checks every parameter and the relations between them, against the engine (for the
    /// element capacities and the schedule).
    pub fn validate(&self, engine_map: &TorqueMapSpec, rev_limit_rpm: f64) -> Result<(), SpecError> {
        let Some(gb) = self.gearbox() else {
            return Err(err(
                "gearbox",
                "the gearbox file was not loaded (use Vehicle::load, or AutomaticSpec::resolve first)".into(),
            ));
        };
        let gears = gb.analyse().map_err(|e| err("gearbox", format!("gearbox `{}`: {}", gb.name, e.message)))?;
        self.converter.validate().map_err(|m| err("converter", m))?;
        pos("pump_inertia", self.pump_inertia)?;
        pos("turbine_inertia", self.turbine_inertia)?;
        pos("output_inertia", self.output_inertia)?;
        let l = &self.lockup;
        (|| {
            check_pack(&l.mu, l.peak, l.surfaces, l.outer_radius, l.inner_radius)?;
            pos("max_force", l.max_force)?;
            pos("on_rpm", l.on_rpm)?;
            pos("off_rpm", l.off_rpm)?;
            if l.off_rpm >= l.on_rpm {
                return Err(err("off_rpm", format!("`off_rpm` {} must be below `on_rpm` {}", l.off_rpm, l.on_rpm)));
            }
            pos("apply_time", l.apply_time)?;
            if !(l.slip_rpm.is_finite() && l.slip_rpm >= 0.0) {
                return Err(err("slip_rpm", format!("`slip_rpm` is {}; it must be >= 0 rpm", l.slip_rpm)));
            }
            if !(l.lock_rpm.is_finite() && l.lock_rpm >= l.on_rpm) {
                return Err(err(
                    "lock_rpm",
                    format!("`lock_rpm` {} must be at least `on_rpm` {}", l.lock_rpm, l.on_rpm),
                ));
            }
            if !(l.slip_gain.is_finite() && l.slip_gain >= 0.0) {
                return Err(err("slip_gain", format!("`slip_gain` is {}; it must be >= 0", l.slip_gain)));
            }
            Ok(())
        })()
        .map_err(|e: SpecError| e.within("lockup"))?;
        (|| {
            pos("max_engage_kmh", self.park.max_engage_kmh)?;
            pos("holding_torque", self.park.holding_torque)
        })()
        .map_err(|e: SpecError| e.within("park"))?;
        let s = &self.schedule;
        (|| {
            let fwd: Vec<f64> = gears.iter().filter(|g| !g.neutral && g.ratio > 0.0).map(|g| g.ratio).collect();
            let lines = std::iter::once(("upshift_rpm", &s.upshift_rpm, 0u32))
                .chain(s.upshift_by_gear.iter().map(|(g, t)| ("upshift_by_gear", t, *g)))
                .chain(std::iter::once(("downshift_rpm", &s.downshift_rpm, 0u32)));
            for (key, t, g) in lines {
                t.validate().map_err(|e| err(key, format!("`{key}`: {e}")))?;
                if t.y_range().0 <= 0.0 {
                    return Err(err(key, format!("`{key}` speeds must be > 0 rpm")));
                }
                if key != "downshift_rpm" && t.y_range().1 > rev_limit_rpm {
                    return Err(err(
                        key,
                        format!(
                            "`{key}` reaches {} rpm, above the rev limiter ({rev_limit_rpm} rpm): the box would never upshift at full throttle",
                            t.y_range().1
                        ),
                    ));
                }
                if key == "upshift_by_gear" && !(g >= 1 && (g as usize) < fwd.len()) {
                    return Err(err(
                        key,
                        format!("`upshift_by_gear` names gear {g}; it must be a forward gear below the top one (1..{})", fwd.len() - 1),
                    ));
                }
            }
            // Hysteresis: right after an upshift k -> k+1 at its upshift line, the turbine runs
            // at up * r_{k+1} / r_k and must be above the downshift line, or the box hunts.
            for (k, w) in fwd.windows(2).enumerate() {
                let step = w[1] / w[0];
                for j in 0..=20 {
                    let th = j as f64 / 20.0;
                    let (up, down) = (s.upshift(k + 1).eval(th), s.downshift_rpm.eval(th));
                    if down >= 0.95 * up * step {
                        return Err(err(
                            "downshift_rpm",
                            format!(
                                "at throttle {th:.2} the downshift line ({down:.0} rpm) is not below the turbine speed after the {}-{} upshift ({:.0} rpm = {up:.0} x {step:.3}, less 5 %): the box would hunt",
                                k + 1,
                                k + 2,
                                up * step
                            ),
                        ));
                    }
                }
            }
            if !(s.kickdown_throttle > 0.0 && s.kickdown_throttle <= 1.0) {
                return Err(err("kickdown_throttle", "`kickdown_throttle` must be in (0, 1]".into()));
            }
            pos("min_time_in_gear", s.min_time_in_gear)?;
            pos("wheelspin_slip", s.wheelspin_slip)
        })()
        .map_err(|e: SpecError| e.within("schedule"))?;
        let c = &self.shift;
        (|| {
            pos("torque_phase", c.torque_phase)?;
            pos("inertia_phase", c.inertia_phase)?;
            pos("end_phase", c.end_phase)?;
            if !(c.hold_margin.is_finite() && c.hold_margin >= 1.0) {
                return Err(err("hold_margin", format!("`hold_margin` is {}; it must be >= 1", c.hold_margin)));
            }
            if !(0.0..=1.0).contains(&c.torque_reduction) {
                return Err(err("torque_reduction", "`torque_reduction` must be in [0, 1]".into()));
            }
            pos("pressure_lag", c.pressure_lag)?;
            pos("garage_time", c.garage_time)?;
            pos("timeout", c.timeout)
        })()
        .map_err(|e: SpecError| e.within("shift"))?;
        let t = &self.thermal;
        (|| {
            pos("heat_capacity", t.heat_capacity)?;
            if !(t.cooling.is_finite() && t.cooling >= 0.0) {
                return Err(err("cooling", "`cooling` must be >= 0 W/K".into()));
            }
            if !(t.oil.is_finite() && t.limit.is_finite() && t.limit > t.oil) {
                return Err(err("limit", "`limit` must be a temperature above `oil`".into()));
            }
            Ok(())
        })()
        .map_err(|e: SpecError| e.within("thermal"))?;
        // Every element must hold its share of the peak engine torque times the stall torque
        // ratio in every gear it closes (else the car cannot launch at full throttle).
        let map = engine_map.build().map_err(|m| err("gearbox", m))?;
        let peak = map.peak_full_load();
        let tr0 = self.converter.torque_ratio.eval(0.0);
        for g in gears.iter().filter(|g| !g.neutral) {
            for (k, f) in g.closed.iter().zip(&g.torque_factors) {
                let e = &gb.elements[*k];
                let need = f.abs() * peak * tr0;
                if e.capacity() * e.peak < need {
                    return Err(err(
                        "gearbox",
                        format!(
                            "element `{}` holds {:.0} N m at full pressure but gear {} needs {need:.0} N m ({:.3} x {peak:.0} N m peak engine torque x {tr0} stall torque ratio); enlarge its piston, plates or pressure",
                            e.name,
                            e.capacity() * e.peak,
                            g.name,
                            f.abs()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
