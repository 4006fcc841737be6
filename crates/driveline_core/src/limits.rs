//! The plausible range of every parameter: what `check` and the builders accept.
//!
//! A value outside its range is refused with the range in the message (and the file position
//! when it comes from a file), so that what is accepted runs: the ranges are wide enough for
//! any road vehicle, test rig or Modelica example, and narrow enough that the solver's sums and
//! products of them stay finite. [`RANGES`] lists them by parameter name; a name not listed
//! takes the bounds of its quantity, [`MAGNITUDE`] at most.

/// The largest magnitude of any parameter not listed in [`RANGES`]: 1e7.
pub const MAGNITUDE: f64 = 1e7;
/// The largest magnitude of a signal's value (a torque, speed, force or normalised force):
/// 1e7.
pub const SIGNAL: f64 = 1e7;
/// The largest magnitude of a time, s (a start time, a duration, a period): 1e9 s.
pub const TIME: f64 = 1e9;
/// The smallest non-zero inertia (kg m^2) or mass (kg) of an element (`J`, `m`): 1e-12. Zero
/// is a massless node; a positive value below this (1e-300) vanishes against its neighbours'
/// stiffness in the solver's matrices.
pub const MIN_MASS: f64 = 1e-12;
/// The highest frequency of a signal, Hz: 1e4.
pub const FREQUENCY: f64 = 1e4;

/// `(parameter, min, max, unit)`: the plausible range of each named parameter, both ends
/// inclusive (a parameter that must be strictly positive says so where it is checked). Element
/// parameters (scenario files) first, then vehicle, clutch, gearbox and automatic parameters.
pub const RANGES: &[(&str, f64, f64, &str)] = &[
    // Elements.
    ("J", 0.0, 1e4, "kg m^2"),
    ("phi_start", -1e6, 1e6, "rad"),
    ("phi0", -1e6, 1e6, "rad"),
    ("phi_rel_start", -1e6, 1e6, "rad"),
    ("phi_rel0", -1e6, 1e6, "rad"),
    ("w_start", -1e4, 1e4, "rad/s"),
    ("w_rel_start", -1e4, 1e4, "rad/s"),
    ("tau_constant", -1e6, 1e6, "N m"),
    ("step_torque", -1e6, 1e6, "N m"),
    ("offset_torque", -1e6, 1e6, "N m"),
    ("tau_nominal", -1e6, 1e6, "N m"),
    ("w_nominal", 1e-3, 1e4, "rad/s"),
    ("w0", 1e-6, 1e4, "rad/s"),
    ("w_fixed", -1e4, 1e4, "rad/s"),
    ("TRef", 1.0, 1e4, "K"),
    ("T_ref", 1.0, 1e4, "K"),
    ("T", 1.0, 1e4, "K"),
    ("T_start", 1.0, 1e4, "K"),
    ("alpha20", -0.1, 0.1, "1/K"),
    ("alpha", -0.1, 0.1, "1/K"),
    ("C", 1e-6, 1e9, "J/K"),
    ("G", 0.0, 1e7, "W/K"),
    ("Q_flow", -1e9, 1e9, "W"),
    ("deltaPhi", -1e6, 1e6, "rad"),
    ("start_time", -1e9, 1e9, "s"),
    ("shift_time", 1e-6, 1e3, "s"),
    ("ratio", 1e-3, 1e3, "(magnitude)"),
    ("c", 0.0, 1e8, "N m/rad"),
    ("d", 0.0, 1e6, "N m s/rad"),
    ("b", 0.0, 10.0, "rad"),
    ("S", 0.0, 1e8, "N m/rad"),
    ("D", 0.0, 1e6, "N m s/rad"),
    ("fn_max", 0.0, 1e7, "N"),
    ("cgeo", 0.0, 10.0, "m"),
    ("peak", 1.0, 100.0, "(static / kinetic)"),
    ("m", 0.0, 1e6, "kg"),
    ("s_start", -1e9, 1e9, "m"),
    ("v_start", -1e3, 1e3, "m/s"),
    ("f_nominal", -1e7, 1e7, "N"),
    ("v_nominal", 1e-3, 1e3, "m/s"),
    ("v_low", 1e-6, 10.0, "m/s"),
    ("teeth", 1.0, 1e3, ""),
    // Vehicles.
    ("air_density", 0.1, 10.0, "kg/m^3"),
    ("apply_time", 1e-4, 10.0, "s"),
    ("cg_height", 0.0, 5.0, "m"),
    ("clamp_force", 1.0, 1e6, "N"),
    ("clearance", 1e-6, 0.1, "m"),
    ("clutch_release_time", 1e-4, 10.0, "s"),
    ("coast_ramp", 0.0, 10.0, ""),
    ("power_ramp", 0.0, 10.0, ""),
    ("coefficient", 1e-6, 1e3, ""),
    ("cone_radius", 1e-3, 1.0, "m"),
    ("cooling", 0.0, 1e5, "W/K"),
    ("coulomb", 0.0, 1e4, "N m"),
    ("damping", 0.0, 1e6, "N m s/rad"),
    ("density", 1.0, 2e3, "kg/m^3"),
    ("detent_force", 0.0, 1e4, "N"),
    ("detent_width", 1e-6, 0.1, "m"),
    ("disc_inertia", 1e-6, 10.0, "kg m^2"),
    ("drag_area", 0.0, 50.0, "m^2"),
    ("end_phase", 1e-4, 10.0, "s"),
    ("face_friction", 0.0, 2.0, ""),
    ("face_radius", 1e-3, 1.0, "m"),
    ("final_drive", 0.1, 50.0, ""),
    ("front_brake", 0.0, 1e5, "N m"),
    ("rear_brake", 0.0, 1e5, "N m"),
    ("parking_brake", 0.0, 1e5, "N m"),
    ("garage_time", 1e-4, 10.0, "s"),
    ("half_shaft_stiffness", 1.0, 1e8, "N m/rad"),
    ("heat_capacity", 1.0, 1e7, "J/K"),
    ("hold", 0.0, 10.0, "s"),
    ("holding_torque", 1.0, 1e5, "N m"),
    ("hysteresis_rpm", 0.0, 5e3, "rpm"),
    ("idle_rpm", 100.0, 5e3, "rpm"),
    ("stall_rpm", 0.0, 5e3, "rpm"),
    ("idler_inertia", 1e-6, 10.0, "kg m^2"),
    ("index_speed", 1e-3, 1e3, "rad/s"),
    ("inertia", 1e-3, 1e3, "kg m^2 (an engine, a wheel)"),
    ("inertia_phase", 1e-4, 10.0, "s"),
    ("inner_radius", 1e-3, 1.0, "m"),
    ("outer_radius", 1e-3, 1.0, "m"),
    ("ki", 0.0, 1e3, ""),
    ("kp", 0.0, 1e3, ""),
    ("mass", 1e-3, 1e5, "kg (a body or a shift linkage)"),
    ("max_engage_kmh", 0.1, 500.0, "km/h"),
    ("max_engage_speed", 1e-3, 1e3, "rad/s"),
    ("max_force", 1.0, 1e6, "N"),
    ("max_torque", 1.0, 1e5, "N m"),
    ("min_overlap", 1e-4, 10.0, "s"),
    ("min_time_in_gear", 1e-3, 60.0, "s"),
    ("mu", 1e-3, 10.0, ""),
    ("off_rpm", 1.0, 2e4, "rpm"),
    ("on_rpm", 1.0, 2e4, "rpm"),
    ("output_inertia", 1e-6, 100.0, "kg m^2"),
    ("pressure_lag", 1e-4, 10.0, "s"),
    ("preload", 0.0, 1e4, "N m"),
    ("pump_inertia", 1e-6, 10.0, "kg m^2"),
    ("radius", 0.05, 5.0, "m"),
    ("rolling_resistance", 0.0, 1.0, ""),
    ("shift_force", 1.0, 1e5, "N"),
    ("stiffness", 1.0, 1e9, "N/m or N m/rad"),
    ("stop_damping", 0.0, 1e6, "N s/m"),
    ("stop_stiffness", 1.0, 1e10, "N/m"),
    ("timeout", 1e-3, 60.0, "s"),
    ("tooth_height", 1e-6, 0.1, "m"),
    ("torque_phase", 1e-4, 10.0, "s"),
    ("turbine_inertia", 1e-6, 10.0, "kg m^2"),
    ("v_threshold", 1e-3, 100.0, "m/s"),
    ("wheelbase", 0.5, 20.0, "m"),
    ("wheelspin_slip", 1e-3, 100.0, "m/s"),
    ("piston_area", 1e-5, 1.0, "m^2"),
    ("fill_flow", 1e-8, 1.0, "m^3/s"),
    ("return_spring", 0.0, 1e5, "N"),
    ("max_pressure", 1e3, 1e8, "Pa"),
];

/// `None` when every point of a table lies within `|x| <= x_max` and `|y| <= y_max`; else
/// what is wrong.
pub fn table_outside(points: &[(f64, f64)], x_max: f64, y_max: f64) -> Option<String> {
    points.iter().enumerate().find(|(_, p)| p.0.abs() > x_max || p.1.abs() > y_max).map(|(k, p)| {
        format!("row {k} ({}, {}) is outside the plausible range (|x| <= {x_max:e}, |y| <= {y_max:e})", p.0, p.1)
    })
}

/// The plausible range of `name`: `(min, max, unit)`.
pub fn range(name: &str) -> Option<(f64, f64, &'static str)> {
    RANGES.iter().find(|r| r.0 == name).map(|r| (r.1, r.2, r.3))
}

/// `None` when `v` is within the plausible range of `name` (or, for a name not listed, within
/// [`MAGNITUDE`]); else what is allowed, as a message ending.
pub fn outside(name: &str, v: f64) -> Option<String> {
    match range(name) {
        Some((lo, hi, unit)) => {
            let ok = if name == "ratio" { (lo..=hi).contains(&v.abs()) } else { (lo..=hi).contains(&v) };
            let sep = if unit.is_empty() { "" } else { " " };
            (!ok).then(|| {
                if name == "ratio" {
                    format!("within {lo:e} .. {hi:e} in magnitude (the plausible range)")
                } else {
                    format!("within {lo} .. {hi}{sep}{unit} (the plausible range)")
                }
            })
        }
        None => (v.abs() > MAGNITUDE).then(|| format!("within +-{MAGNITUDE:e} (the plausible range)")),
    }
}

/// The plausible range of parameter `name` as the element catalogue ([`crate::ElementKind`])
/// states it, one line per parameter.
pub fn catalogue_text(name: &str) -> String {
    fn num(x: f64) -> String {
        if x == 0.0 {
            "0".into()
        } else if x.fract() == 0.0 && x.abs() < 1e4 {
            format!("{x}")
        } else {
            format!("{x:e}")
        }
    }
    match range(name) {
        Some((_, hi, unit)) if name == "J" || name == "m" => {
            format!("Plausible range: 0, or {} .. {} {unit}.", num(MIN_MASS), num(hi))
        }
        Some((lo, hi, _)) if name == "ratio" => format!("Plausible range: {} .. {} in magnitude.", num(lo), num(hi)),
        Some((lo, hi, unit)) => {
            let sep = if unit.is_empty() { "" } else { " " };
            format!("Plausible range: {} .. {}{sep}{unit}.", num(lo), num(hi))
        }
        None => format!("Plausible range: +-{} (`limits::MAGNITUDE`).", num(MAGNITUDE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every number a file gives an element has its plausible range in the element catalogue,
    /// the line above the field, as [`RANGES`] has it.
    #[test]
    fn the_element_catalogue_states_every_range() {
        let model = include_str!("model.rs");
        let start = model.find("pub enum ElementKind").expect("ElementKind");
        let body = &model[start..start + model[start..].find("\n}\n").expect("its end")];
        let lines: Vec<&str> = body.lines().collect();
        let mut fields = 0;
        for (k, line) in lines.iter().enumerate() {
            let t = line.trim();
            let Some((name, ty)) = t.split_once(": ") else { continue };
            if !(ty == "f64," || ty == "Option<f64>,") || name.contains(' ') {
                continue;
            }
            fields += 1;
            // (Attributes may stand between the docs and the field.)
            let doc = lines[..k].iter().rev().find(|l| !l.trim().starts_with("#[")).expect("a doc line");
            let want = catalogue_text(name);
            assert!(doc.trim() == format!("/// {want}"), "`{name}`: the catalogue says `{}`, not `{want}`", doc.trim());
        }
        assert!(fields > 60, "only {fields} parameters found");
    }

    #[test]
    fn every_range_is_ordered_and_listed_once() {
        for (k, r) in RANGES.iter().enumerate() {
            assert!(r.1 <= r.2, "{}", r.0);
            assert!(!RANGES[k + 1..].iter().any(|s| s.0 == r.0), "{} listed twice", r.0);
        }
        assert!(outside("J", 1e300).is_some() && outside("J", 1.0).is_none());
        assert!(outside("ratio", -3.0).is_none() && outside("ratio", 4294967296.0).is_some());
        assert!(outside("unlisted", 1e8).is_some() && outside("unlisted", -1e6).is_none());
    }
}
